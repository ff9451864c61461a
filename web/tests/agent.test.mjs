// Unit tests of the tier 4 view's model (src/agent.js) over synthetic spans shaped as the
// executor writes them (docs/executor.md, "Spans and events") and as the multi-agent
// patterns' span contract says (agent and judge spans): `node --test tests/`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { agentModel, pendingStep, duration } from '../src/agent.js';

let clock = 0;
let seq = 0;
/** span makes a span started one second after the previous one. */
const span = (type, parentId, attributes = {}, extra = {}) => ({
  id: 's' + ++seq, parentId, type, name: extra.name || type, status: 'ok', attempt: 1,
  startedAt: new Date(Date.UTC(2026, 10, 24, 12, 0, ++clock)).toISOString(), attributes, ...extra,
});

/** execute builds one agent's spans under parent: plan 1 (s1, s2), step s1 judged replan,
 * the replan with plan 2 (t1, t2), t1 (a tool step) and t2 pass, the goal achieved. */
function execute(parent) {
  const out = [];
  const add = (s) => (out.push(s), s);
  add(span('goal_decompose', parent, { plan: 1, steps: ['s1', 's2'], tries: 2 }, { name: 'plan 1' }));
  const s1 = add(span('chain_step', parent, { agent_step: 1, step_id: 's1', execution_type: 'tool_using', description: 'look it up' }));
  const it = add(span('react_iteration', s1.id, { iteration: 1 }, { name: 'iteration 1' }));
  add(span('llm_call', it.id, {}, { billing: { provider: 'sim', model: 'fast', tokensIn: 10, tokensOut: 5, costUsd: 0.0001 } }));
  add(span('tool_call', it.id, { tool: 'demo_weather' }));
  add(span('reflection', s1.id, { agent_step: 1, step_id: 's1', verdict: 'replan', reasoning: 'wrong city' }));
  const rp = add(span('plan_adjust', parent, { kind: 'replan', replan: 1, agent_step: 1, reasoning: 'wrong city',
    removed: ['s2'], added: ['t1', 't2'], before: ['s2'], after: ['t1', 't2'] }, { name: 'replan 1' }));
  add(span('goal_decompose', rp.id, { plan: 2, steps: ['t1', 't2'] }, { name: 'plan 2' }));
  for (const [n, id] of [[2, 't1'], [3, 't2']]) {
    const st = add(span('chain_step', parent, { agent_step: n, step_id: id, execution_type: 'llm_only' }));
    add(span('llm_call', st.id));
    add(span('reflection', st.id, { agent_step: n, step_id: id, verdict: 'pass', reasoning: id + ' is done' }));
  }
  add(span('goal_evaluate', parent, { goal_achieved: true, reasoning: 'the weather is known' }));
  return out;
}

test('an execute run: plans, steps with verdicts and subtrees, the replan diff and the evaluation, in order', () => {
  const root = span('dispatch', undefined);
  const spans = [root, span('queue_wait', root.id), ...execute(root.id)];
  const m = agentModel(spans.reverse()); // arrival order does not matter
  assert.equal(m.pattern, 'execute');
  assert.deepEqual(m.agents, []);
  assert.equal(m.judge, null);
  assert.deepEqual(m.timeline.map((i) => i.kind + (i.n ?? '')),
    ['plan1', 'step1', 'adjust1', 'plan2', 'step2', 'step3', 'evaluation']);
  const [p1, s1, rp, p2, , t2, ev] = m.timeline;
  assert.equal(p1.tries, 2);
  assert.equal(p1.replan, false);
  assert.equal(p2.replan, true);
  // What became of plan 1's steps: s1 ran and was judged replan, s2 was removed by the replan.
  assert.deepEqual(p1.steps.map((s) => [s.id, s.state, s.verdict]), [['s1', 'done', 'replan'], ['s2', 'removed', null]]);
  assert.deepEqual(p2.steps.map((s) => [s.id, s.state, s.verdict]), [['t1', 'done', 'pass'], ['t2', 'done', 'pass']]);
  assert.equal(s1.stepId, 's1');
  assert.equal(s1.verdict, 'replan');
  assert.equal(s1.reasoning, 'wrong city');
  assert.equal(s1.description, 'look it up');
  // The step's subtree holds its iteration with the LLM and tool calls, then its reflection.
  assert.deepEqual(s1.children.map((c) => c.type), ['react_iteration', 'reflection']);
  assert.deepEqual(s1.children[0].children.map((c) => c.type), ['llm_call', 'tool_call']);
  assert.deepEqual([rp.adjustKind, rp.n, rp.afterStep, rp.removed, rp.added, rp.before, rp.after],
    ['replan', 1, 1, ['s2'], ['t1', 't2'], ['s2'], ['t1', 't2']]);
  assert.equal(t2.verdict, 'pass');
  assert.deepEqual([ev.achieved, ev.reasoning], [true, 'the weather is known']);
});

test('a run in flight: a running plan has no steps yet, a running step no verdict', () => {
  const root = span('dispatch', undefined);
  const plan = span('goal_decompose', root.id, { plan: 1 }, { status: 'running' });
  let m = agentModel([root, plan]);
  assert.deepEqual(m.timeline.map((i) => [i.kind, i.steps.length]), [['plan', 0]]);
  const done = { ...plan, status: 'ok', attributes: { plan: 1, steps: ['a', 'b'] } };
  const st = span('chain_step', root.id, { agent_step: 1, step_id: 'a' }, { status: 'running' });
  m = agentModel([root, done, st]);
  assert.deepEqual(m.timeline[0].steps.map((s) => s.state), ['running', 'planned']);
  assert.equal(m.timeline[1].verdict, null);
});

test('an adjustment diff, and a verdict the tree does not know is no verdict', () => {
  const root = span('dispatch', undefined);
  const st = span('chain_step', root.id, { agent_step: 1, step_id: 'a' });
  const rf = span('reflection', st.id, { verdict: 'adjust', reasoning: 'needs the unit' });
  const ad = span('plan_adjust', root.id, { kind: 'adjust', agent_step: 1, reasoning: 'needs the unit', removed: ['b'],
    added: ['b2'], before: ['b', 'c'], after: ['b2', 'c'] });
  const st2 = span('chain_step', root.id, { agent_step: 2, step_id: 'b2' });
  const rf2 = span('reflection', st2.id, { verdict: 'maybe', reasoning: '?' });
  const m = agentModel([root, st, rf, ad, st2, rf2]);
  const d = m.timeline.find((i) => i.kind === 'adjust');
  assert.deepEqual([d.adjustKind, d.removed, d.added, d.before, d.after], ['adjust', ['b'], ['b2'], ['b', 'c'], ['b2', 'c']]);
  assert.equal(m.timeline[0].verdict, 'adjust');
  assert.equal(m.timeline[2].verdict, null);
});

test('a chain step span without agent_step is not an agent step', () => {
  const root = span('dispatch', undefined);
  const m = agentModel([root, span('chain_step', root.id, { step: 'x' })]);
  assert.deepEqual(m.timeline, []);
});

test('compete: one column per agent span in agent order, each with its own timeline; the judge\'s choice marked', () => {
  const root = span('dispatch', undefined);
  const spans = [root];
  // Agents start in parallel and in any order; agent 3 first.
  for (const i of [3, 1, 2]) {
    const a = span('agent', root.id, { agent: i, role: 'agent', pattern: 'compete', temperature: 0.2 * i }, { name: `agent ${i}: agent` });
    spans.push(a, ...execute(a.id));
  }
  const judge = span('judge', root.id, { pattern: 'compete', chosen: 2, reasoning: 'agent 2 cites its source' });
  spans.push(judge, span('llm_call', judge.id));
  const m = agentModel(spans);
  assert.equal(m.pattern, 'compete');
  assert.deepEqual(m.agents.map((a) => [a.agent, a.role, a.chosen]), [[1, 'agent', false], [2, 'agent', true], [3, 'agent', false]]);
  assert.equal(m.agents[2].temperature, 0.6000000000000001);
  // Each agent's spans stay in its column: seven phase items, none in the run's own timeline.
  for (const a of m.agents) assert.deepEqual(a.timeline.map((i) => i.kind), ['plan', 'step', 'adjust', 'plan', 'step', 'step', 'evaluation']);
  assert.deepEqual(m.timeline, []);
  assert.deepEqual([m.judge.chosen, m.judge.reasoning, m.judge.tie], [2, 'agent 2 cites its source', false]);
  assert.deepEqual(m.judge.children.map((c) => c.type), ['llm_call']);
});

test('self_consistent: votes sorted by count, a tie sent to the judge', () => {
  const root = span('dispatch', undefined);
  const agents = [1, 2, 3, 4].map((i) => span('agent', root.id, { agent: i, role: 'agent', pattern: 'self_consistent' }, { name: `agent ${i}: agent` }));
  const judge = span('judge', root.id, { pattern: 'self_consistent', chosen: 3, reasoning: 'tie broken: 42 is exact',
    votes: { '41': [1, 2], '42': [3, 4] }, tie: true });
  const m = agentModel([root, ...agents, judge]);
  assert.equal(m.pattern, 'self_consistent');
  assert.deepEqual(m.judge.votes, [{ answer: '41', agents: [1, 2] }, { answer: '42', agents: [3, 4] }]);
  assert.equal(m.judge.tie, true);
  assert.deepEqual(m.agents.filter((a) => a.chosen).map((a) => a.agent), [3]);
  for (const a of m.agents) assert.deepEqual(a.timeline, []);
});

test('critic and collaborate: roles and rounds; a synthesis chooses no agent', () => {
  const root = span('dispatch', undefined);
  const gen = span('agent', root.id, { agent: 1, role: 'generator', pattern: 'critic' });
  const crit = span('agent', root.id, { agent: 2, role: 'critic', pattern: 'critic', round: 1 });
  const rev = span('agent', root.id, { agent: 3, role: 'reviser', pattern: 'critic', round: 1 });
  const judge = span('judge', root.id, { pattern: 'critic', chosen: 3, reasoning: 'the revision answers the critique' });
  let m = agentModel([root, gen, span('llm_call', gen.id), crit, rev, judge]);
  assert.deepEqual(m.agents.map((a) => [a.role, a.round, a.chosen]), [['generator', null, false], ['critic', 1, false], ['reviser', 1, true]]);

  const a1 = span('agent', root.id, { agent: 1, role: 'researcher', pattern: 'collaborate' });
  const a2 = span('agent', root.id, { agent: 2, role: 'writer', pattern: 'collaborate' });
  const syn = span('judge', root.id, { pattern: 'collaborate', reasoning: 'merged both' });
  m = agentModel([root, a1, a2, syn, ...execute(a2.id)]);
  assert.equal(m.judge.chosen, null);
  assert.deepEqual(m.agents.map((a) => [a.role, a.chosen, a.timeline.length]), [['researcher', false, 0], ['writer', false, 7]]);
});

test('an agent span without an index attribute takes it from its name', () => {
  const root = span('dispatch', undefined);
  const m = agentModel([root, span('agent', root.id, { role: 'agent' }, { name: 'agent 4: agent' })]);
  assert.equal(m.agents[0].agent, 4);
  assert.equal(m.pattern, null);
});

test('pendingStep finds the step a pause waits at, in the run or in an agent', () => {
  const root = span('dispatch', undefined);
  const st = span('chain_step', root.id, { agent_step: 1, step_id: 's1', paused_for_approval: true });
  let m = agentModel([root, st]);
  assert.equal(pendingStep(m, 1).stepId, 's1');
  assert.equal(pendingStep(m, 2), null);
  const a = span('agent', root.id, { agent: 1, pattern: 'compete' });
  const ast = span('chain_step', a.id, { agent_step: 2, step_id: 'x', paused_for_approval: true });
  const b = span('agent', root.id, { agent: 2, pattern: 'compete' });
  const bst = span('chain_step', b.id, { agent_step: 2, step_id: 'y', paused_for_approval: true });
  m = agentModel([root, a, ast, b, bst]);
  assert.equal(pendingStep(m, 2, 1).stepId, 'x', 'the pause names agent 1');
  assert.equal(pendingStep(m, 2, 2).stepId, 'y', 'the pause names agent 2');
  assert.equal(pendingStep(m, 2, 3), null, 'no agent 3');
});

test('duration', () => {
  assert.deepEqual([0, 45e3, 185e3, 2 * 3600e3 + 4 * 60e3, 50 * 3600e3, -5].map(duration), ['0s', '45s', '3m 05s', '2h 04m', '2d 2h', '0s']);
});
