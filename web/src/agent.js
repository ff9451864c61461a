// The tier 4 (autonomous) run as a reader follows it, built from its spans alone
// (docs/executor.md, "Spans and events"): plans (goal_decompose) with their steps, each
// executed step (a chain_step span with agent_step) with its own spans and its reflection's
// verdict, plan adjustments and replans with their diff, and the goal evaluation. A
// multi-agent pattern (compete, self_consistent, critic, collaborate) adds one `agent` span
// per agent, each holding such a timeline, and a `judge` span with the choice. Pure data, no
// DOM: the drawing is agenttree.js, and tests/agent.test.mjs checks this over synthetic spans.

const byStart = (a, b) => new Date(a.startedAt) - new Date(b.startedAt) || (a.id < b.id ? -1 : 1);

/** VERDICTS are the reflection's verdicts with the icon and the word the tree shows. */
export const VERDICTS = {
  pass: { icon: '✓', label: 'pass' },
  adjust: { icon: '✎', label: 'adjust' },
  replan: { icon: '↻', label: 'replan' },
  fail: { icon: '✗', label: 'fail' },
};

const list = (v) => (Array.isArray(v) ? v.map(String) : v == null || v === '' ? [] : [String(v)]);
const num = (v) => (v == null || v === '' || Number.isNaN(Number(v)) ? null : Number(v));

/**
 * agentModel turns a run's spans into what the tier 4 view draws:
 * {timeline, agents, judge, pattern}. timeline is the run's own agent (pattern execute, or
 * whatever of a pattern run is outside its agents); agents one entry per `agent` span, in
 * agent order, each {span, agent, role, pattern, temperature, round, chosen, timeline};
 * judge the `judge` span's {span, pattern, chosen, reasoning, votes, tie, children} or null.
 */
export function agentModel(spans) {
  const byId = new Map(spans.map((s) => [s.id, s]));
  const kids = new Map();
  const roots = [];
  for (const s of [...spans].sort(byStart)) {
    if (s.parentId && byId.has(s.parentId)) {
      if (!kids.has(s.parentId)) kids.set(s.parentId, []);
      kids.get(s.parentId).push(s);
    } else roots.push(s);
  }
  const childrenOf = (s) => kids.get(s.id) || [];
  const subtree = (s) => ({ ...s, children: childrenOf(s).map(subtree) });

  const agentSpans = [];
  let judgeSpan = null;
  // collect walks down from s gathering this scope's phase spans; an agent span starts a
  // scope of its own, a judge is the pattern's, and a phase span's descendants are its own.
  const collect = (s, into) => {
    if (s.type === 'agent') { agentSpans.push(s); return; }
    if (s.type === 'judge') { judgeSpan = judgeSpan || s; return; }
    if (PHASES.has(s.type) && (s.type !== 'chain_step' || s.attributes?.agent_step != null)) { into.push(s); return; }
    for (const c of childrenOf(s)) collect(c, into);
  };
  const own = [];
  for (const r of roots) collect(r, own);
  const timeline = scope(own, childrenOf, subtree);

  const judge = judgeSpan ? judgeOf(judgeSpan, childrenOf, subtree) : null;
  const agents = agentSpans.map((s) => {
    const a = s.attributes || {};
    const phases = [];
    for (const c of childrenOf(s)) collect(c, phases);
    const agent = num(a.agent) ?? num(String(s.name).match(/^agent (\d+)/)?.[1]);
    return {
      span: s, agent, role: a.role || null, pattern: a.pattern || null,
      temperature: num(a.temperature), round: num(a.round),
      chosen: judge?.chosen != null && agent === judge.chosen,
      timeline: scope(phases, childrenOf, subtree),
    };
  }).sort((x, y) => (x.agent ?? 1e9) - (y.agent ?? 1e9) || byStart(x.span, y.span));
  const pattern = judge?.pattern || agents.find((a) => a.pattern)?.pattern || (agents.length ? null : 'execute');
  return { timeline, agents, judge, pattern };
}

const PHASES = new Set(['goal_decompose', 'chain_step', 'plan_adjust', 'goal_evaluate']);

function judgeOf(s, childrenOf, subtree) {
  const a = s.attributes || {};
  const votes = a.votes && typeof a.votes === 'object' && !Array.isArray(a.votes)
    ? Object.entries(a.votes).map(([answer, agents]) => ({ answer, agents: list(agents).map(Number) }))
      .sort((x, y) => y.agents.length - x.agents.length || (x.answer < y.answer ? -1 : 1))
    : [];
  return { span: s, pattern: a.pattern || null, chosen: num(a.chosen), reasoning: a.reasoning || '', votes,
    tie: a.tie === true, children: childrenOf(s).map(subtree) };
}

/**
 * scope orders one agent's phase spans into a timeline of items, in start order:
 * plan {n, steps [{id, state, verdict}], tries, replan}, step {n, stepId, description,
 * executionType, verdict, reasoning, reflection, paused}, adjust {adjustKind, n, afterStep,
 * reasoning, removed, added, before, after}, evaluation {achieved, reasoning}; each with
 * span and children (its spans' subtrees, for tree.js).
 * A replan's plan (a goal_decompose under its plan_adjust) is listed after the adjustment.
 */
function scope(phases, childrenOf, subtree) {
  const items = [];
  for (const s of [...phases].sort(byStart)) {
    const a = s.attributes || {};
    if (s.type === 'goal_decompose') items.push(planItem(s, false, childrenOf, subtree));
    else if (s.type === 'chain_step') {
      const kids = childrenOf(s);
      const rf = kids.find((c) => c.type === 'reflection');
      const ra = rf?.attributes || {};
      items.push({
        kind: 'step', span: s, n: num(a.agent_step), stepId: a.step_id || s.name, description: a.description || '',
        executionType: a.execution_type || '', paused: a.paused_for_approval === true,
        reflection: rf || null, verdict: VERDICTS[ra.verdict] ? ra.verdict : null, reasoning: ra.reasoning || '',
        children: kids.map(subtree),
      });
    } else if (s.type === 'plan_adjust') {
      const kind = a.kind || (String(a.step || '').startsWith('replan') ? 'replan' : 'adjust');
      items.push({
        kind: 'adjust', span: s, adjustKind: kind, n: num(a.replan), afterStep: num(a.agent_step),
        reasoning: a.reasoning || '', removed: list(a.removed), added: list(a.added),
        before: list(a.before), after: list(a.after),
        children: childrenOf(s).filter((c) => c.type !== 'goal_decompose').map(subtree),
      });
      const plan = childrenOf(s).find((c) => c.type === 'goal_decompose');
      if (plan) items.push(planItem(plan, true, childrenOf, subtree));
    } else if (s.type === 'goal_evaluate') {
      items.push({ kind: 'evaluation', span: s, achieved: typeof a.goal_achieved === 'boolean' ? a.goal_achieved : null,
        reasoning: a.reasoning || '', children: childrenOf(s).map(subtree) });
    }
  }
  // A plan's steps: what became of each — executed (with its verdict), removed by a later
  // adjustment or replan, or still to come.
  const steps = items.filter((i) => i.kind === 'step');
  const adjusts = items.filter((i) => i.kind === 'adjust');
  for (const p of items.filter((i) => i.kind === 'plan')) {
    p.steps = p.stepIds.map((id) => {
      const ran = steps.find((st) => st.stepId === id && byStart(st.span, p.span) > 0);
      if (ran) return { id, state: ran.verdict ? 'done' : 'running', verdict: ran.verdict, n: ran.n };
      const gone = adjusts.some((ad) => byStart(ad.span, p.span) > 0 && ad.removed.includes(id));
      return { id, state: gone ? 'removed' : 'planned', verdict: null, n: null };
    });
  }
  return items;
}

function planItem(s, replan, childrenOf, subtree) {
  const a = s.attributes || {};
  return { kind: 'plan', span: s, n: num(a.plan) ?? num(String(s.name).match(/\d+/)?.[0]), stepIds: list(a.steps),
    tries: num(a.tries), replan: replan || (num(a.plan) ?? 1) > 1, steps: [], children: childrenOf(s).map(subtree) };
}

/** pendingStep is the step item of timeline (or of an agent's: of agent's when the pause
 * names it) that a pause waits at: the one numbered agentStep, preferring one marked
 * paused_for_approval; null when not drawn yet. */
export function pendingStep(model, agentStep, agent = null) {
  const scopes = agent != null ? model.agents.filter((a) => a.agent === num(agent)).map((a) => a.timeline)
    : [model.timeline, ...model.agents.map((a) => a.timeline)];
  const all = scopes.flat().filter((i) => i.kind === 'step');
  const at = all.filter((i) => i.n === num(agentStep));
  return at.find((i) => i.paused) || at[at.length - 1] || null;
}

/** duration renders milliseconds as "45s", "3m 05s", "2h 04m" or "3d 2h". */
export function duration(msv) {
  const s = Math.max(0, Math.floor(msv / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}
