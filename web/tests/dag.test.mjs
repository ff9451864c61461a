// Unit tests of the chain DAG's layout (src/dag.js): `node --test tests/` (npm test runs them
// before the browser tests).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { layoutChain, groupSteps, counters } from '../src/dag.js';

const step = (stepId, dependsOn = [], status = 'pending', extra = {}) =>
  ({ stepId, jobType: 'demo_llm', status, dependsOn, attempt: 0, costUsd: 0, ...extra });

// plan → three analyses → synthesis, and a report that depends on plan and synthesis.
const research = [
  step('plan', [], 'completed', { costUsd: 0.001 }),
  step('a', ['plan'], 'running'), step('b', ['plan'], 'completed', { costUsd: 0.002 }), step('c', ['plan'], 'skipped'),
  step('synth', ['a', 'b', 'c']),
  step('report', ['plan', 'synth']),
];

test('layers are topological depths: every step right of all its parents', () => {
  const { nodes, edges } = layoutChain(research);
  const at = Object.fromEntries(nodes.map((n) => [n.id, n]));
  assert.deepEqual(Object.fromEntries(nodes.map((n) => [n.id, n.layer])), { plan: 0, a: 1, b: 1, c: 1, synth: 2, report: 3 });
  for (const n of nodes) for (const p of n.dependsOn) assert.ok(at[p].x + at[p].w < n.x, `${p} left of ${n.id}`);
  assert.equal(edges.length, 3 + 3 + 2);
  // Nodes of one layer do not overlap.
  const layer1 = nodes.filter((n) => n.layer === 1).sort((x, y) => x.y - y.y);
  for (let i = 1; i < layer1.length; i++) assert.ok(layer1[i - 1].y + layer1[i - 1].h <= layer1[i].y);
});

test('within a layer, nodes follow their parents (no crossing for two chains side by side)', () => {
  const { nodes } = layoutChain([step('x'), step('y'), step('y2', ['y']), step('x2', ['x'])]);
  const at = Object.fromEntries(nodes.map((n) => [n.id, n]));
  assert.ok(at.x.y < at.y.y);
  assert.ok(at.x2.y < at.y2.y, 'x2 (child of the upper root) is drawn above y2');
});

test('a for_each step is one node with its instances, which add up to its status', () => {
  const steps = [
    step('plan', [], 'completed'),
    step('fan', ['plan'], 'completed', { instance: 0, instances: 3 }),
    step('fan', ['plan'], 'running', { instance: 1, instances: 3 }),
    step('fan', ['plan'], 'queued', { instance: 2, instances: 3 }),
    step('join', ['fan']),
  ];
  const groups = groupSteps(steps);
  assert.deepEqual(groups.map((g) => g.id), ['plan', 'fan', 'join']);
  const fan = groups[1];
  assert.equal(fan.instances.length, 3);
  assert.equal(fan.status, 'running');
  const { nodes } = layoutChain(steps);
  const byId = new Map(nodes.map((n) => [n.id, n]));
  assert.deepEqual(counters(byId.get('fan'), byId).map((c) => c.text), ['1/3 done']);
  steps[2].status = 'failed';
  steps[3].status = 'completed';
  assert.equal(groupSteps(steps)[1].status, 'failed');
});

test('join and fork counters', () => {
  const { nodes } = layoutChain(research);
  const byId = new Map(nodes.map((n) => [n.id, n]));
  assert.deepEqual(counters(byId.get('synth'), byId), [{ kind: 'join', text: '2/3 done' }]);
  assert.deepEqual(counters(byId.get('plan'), byId), [{ kind: 'fork', text: '3/4 started' }]);
  assert.deepEqual(counters(byId.get('report'), byId), [{ kind: 'join', text: '1/2 done' }]);
});

test('unknown parents and a cycle do not break the drawing', () => {
  const { nodes } = layoutChain([step('a', ['b']), step('b', ['a']), step('c', ['nope'])]);
  assert.equal(nodes.length, 3);
  assert.ok(nodes.every((n) => Number.isFinite(n.x) && Number.isFinite(n.y)));
});

test('a fanned-out step listed as a whole beside its instances counts its cost once', () => {
  const steps = [
    step('plan', [], 'completed'),
    step('fan', ['plan'], 'completed', { instances: 2, costUsd: 0.3 }),
    step('fan', ['plan'], 'completed', { instance: 0, instances: 2, costUsd: 0.1 }),
    step('fan', ['plan'], 'cancelled', { instance: 1, instances: 2, costUsd: 0.2 }),
  ];
  steps[1].status = 'failed'; // the coordinator's roll-up: an instance did not complete
  const fan = groupSteps(steps)[1];
  assert.equal(fan.count, 2);
  assert.ok(Math.abs(fan.costUsd - 0.3) < 1e-12, 'cost ' + fan.costUsd);
  assert.equal(fan.status, 'failed');
  steps[1].status = 'pending';
  steps[3].status = 'running';
  assert.equal(groupSteps(steps)[1].status, 'running', 'while the whole has not ended, its instances say');
  // Fanned out to no items: the whole says how many (none) and is the status.
  const empty = groupSteps([step('fan', [], 'completed', { instances: 0 })])[0];
  assert.equal(empty.forEach, true);
  assert.equal(empty.count, 0);
  assert.equal(empty.status, 'completed');
});
