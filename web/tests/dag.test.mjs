// Unit tests of the chain DAG's layout (src/dag.js): `node --test tests/` (npm test runs them
// before the browser tests).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { layoutChain, groupSteps, counters, groupJobs, layoutWorkflow, liveStatus, orderSteps, reasonText, stepName } from '../src/dag.js';

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

// A workflow run: a matrix job of three instances (two steps each), a job that needs it,
// and a job that needs both.
const wfStep = (stepId, job, dependsOn, status, extra = {}) => step(stepId, dependsOn, status, { job, ...extra });
const workflowRun = () => ({
  workflow: {
    name: 'fan', jobs: [
      { id: 'fan', name: 'Fan out', needs: [], instances: 3 },
      { id: 'join', needs: ['fan'] },
      { id: 'report', needs: ['fan', 'join'] },
    ],
  },
  steps: [
    // Listed out of order on purpose: the second step of instance 0 before its first.
    wfStep('fan/0/2', 'fan', ['fan/0/1'], 'running', { matrix: 0 }),
    wfStep('fan/0/1', 'fan', [], 'completed', { matrix: 0, costUsd: 0.001 }),
    wfStep('fan/1/1', 'fan', [], 'completed', { matrix: 1, costUsd: 0.002 }),
    wfStep('fan/1/2', 'fan', ['fan/1/1'], 'skipped', { matrix: 1, reason: 'if' }),
    wfStep('fan/2/1', 'fan', [], 'pending', { matrix: 2 }),
    wfStep('fan/2/2', 'fan', ['fan/2/1'], 'pending', { matrix: 2 }),
    wfStep('join/combine', 'join', ['fan/0/2', 'fan/1/2', 'fan/2/2'], 'pending'),
    wfStep('report/1', 'report', ['join/combine'], 'pending'),
  ],
});

test('a workflow run is one node per job, edges from needs, a matrix job grouped with its instances', () => {
  const { workflow, steps } = workflowRun();
  const { nodes, edges } = layoutWorkflow(workflow, steps);
  assert.deepEqual(nodes.map((n) => [n.id, n.layer]), [['fan', 0], ['join', 1], ['report', 2]]);
  assert.deepEqual(edges.map((e) => `${e.from}>${e.to}`).sort(), ['fan>join', 'fan>report', 'join>report']);
  const at = Object.fromEntries(nodes.map((n) => [n.id, n]));
  assert.equal(at.fan.name, 'Fan out');
  assert.equal(at.join.name, 'join', 'a job without a name is shown by its id');
  assert.equal(at.fan.matrix, true);
  assert.deepEqual(at.fan.instances.map((i) => i.steps.map((s) => s.stepId)),
    [['fan/0/1', 'fan/0/2'], ['fan/1/1', 'fan/1/2'], ['fan/2/1', 'fan/2/2']], 'steps in order, instance by instance');
  assert.deepEqual(at.fan.instances.map((i) => [i.status, i.done]), [['running', false], ['completed', true], ['pending', false]]);
  assert.ok(at.fan.h > at.join.h, 'the matrix node is taller: it has a chip per instance');
  assert.ok(Math.abs(at.fan.costUsd - 0.003) < 1e-12, 'cost of all its steps: ' + at.fan.costUsd);
  assert.equal(at.fan.status, 'running');
  assert.equal(at.join.status, 'pending');
  assert.equal(at.join.steps.length, 1);
  const byId = new Map(nodes.map((n) => [n.id, n]));
  assert.deepEqual(counters(at.fan, byId), [{ kind: 'matrix', text: '1/3 instances done' }, { kind: 'fork', text: '0/2 started' }]);
  assert.deepEqual(counters(at.report, byId), [{ kind: 'join', text: '0/2 done' }]);
});

test('a job shows its result once it has one, else what its steps add up to', () => {
  const { workflow, steps } = workflowRun();
  for (const s of steps.filter((x) => x.job === 'fan' && x.status !== 'skipped')) s.status = 'completed';
  // All the matrix's steps ended, the job's result not yet written: its steps say.
  let fan = groupJobs(workflow, steps)[0];
  assert.equal(fan.status, 'completed');
  assert.deepEqual(counters({ ...fan, children: [] }, new Map()), [{ kind: 'matrix', text: '3/3 instances done' }]);
  workflow.jobs[0].result = 'failure';
  fan = groupJobs(workflow, steps)[0];
  assert.equal(fan.status, 'failed');
  assert.equal(fan.result, 'failure');
  // A failed job with continue-on-error concludes success; its outcome tells the truth.
  Object.assign(workflow.jobs[0], { result: 'success', outcome: 'failure' });
  fan = groupJobs(workflow, steps)[0];
  assert.equal(fan.status, 'completed');
  assert.equal(fan.outcome, 'failure');
  workflow.jobs[0].result = 'failure';
  workflow.jobs[1].result = 'skipped';
  assert.equal(groupJobs(workflow, steps)[1].status, 'skipped');
  // Between two steps of a job (one done, the next not yet dispatched) the job is running.
  assert.equal(liveStatus([step('a', [], 'completed'), step('b', ['a'], 'pending')]), 'running');
  assert.equal(liveStatus([step('a', [], 'held_for_review'), step('b', ['a'], 'pending')]), 'held_for_review');
  assert.equal(liveStatus([step('a', [], 'queued'), step('b', [], 'pending')]), 'queued');
  assert.equal(liveStatus([step('a'), step('b', ['a'])]), 'pending');
  assert.equal(liveStatus([step('a', [], 'completed'), step('b', ['a'], 'cancelled')]), 'cancelled');
  assert.equal(liveStatus([]), 'pending');
});

test('steps without a job field are placed by their id; unknown needs are dropped', () => {
  const workflow = { name: 'w', jobs: [{ id: 'a', needs: ['ghost'] }, { id: 'b', needs: ['a', 'a'] }] };
  const steps = [step('a/1', [], 'completed'), step('b/x', ['a/1'], 'running')];
  const jobs = groupJobs(workflow, steps);
  assert.deepEqual(jobs.map((j) => [j.id, j.steps.map((s) => s.stepId), j.dependsOn]), [['a', ['a/1'], []], ['b', ['b/x'], ['a']]]);
  assert.deepEqual(layoutWorkflow({ name: 'empty', jobs: [] }, []).nodes, []);
});

test('step order, names and reasons', () => {
  const list = [step('j/3', ['j/2']), step('j/2', ['j/1']), step('j/1', ['other/9'])];
  assert.deepEqual(orderSteps(list).map((s) => s.stepId), ['j/1', 'j/2', 'j/3']);
  assert.equal(stepName('research/2/analysis'), 'analysis');
  assert.equal(stepName('build/1'), '1');
  assert.equal(reasonText('if'), 'skipped: its if was false');
  assert.equal(reasonText('job_if'), "skipped: its job's if was false");
  assert.equal(reasonText('job_timeout'), 'cancelled: its job ran out of timeout-minutes');
  assert.equal(reasonText('cancelled_by:fan/0/1'), 'cancelled by fail-fast: fan/0/1 failed');
  assert.equal(reasonText(''), '');
});
