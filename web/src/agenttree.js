// The tier 4 (autonomous) view of a run: its plans with their steps, each executed step with
// its reflection's verdict and its own spans (drawn by tree.js), plan diffs, the goal
// evaluation, a pulsing approval node where a paused run waits, and a multi-agent pattern's
// agents side by side with the judge's choice. The model is agent.js.
import { useEffect, useState } from 'preact/hooks';
import { useReview } from './review.js';
import { agentModel, pendingStep, duration, VERDICTS } from './agent.js';
import { Nested } from './tree.js';
import { html, ms, ErrorBox } from './ui.js';

function Verdict({ verdict, reasoning }) {
  if (!verdict) return html`<span class="verdict v-none" data-testid="verdict" data-verdict="">reflecting…</span>`;
  const v = VERDICTS[verdict];
  return html`<span class=${'verdict v-' + verdict} data-testid="verdict" data-verdict=${verdict} title=${reasoning}>
    <span class="vicon">${v.icon}</span> ${v.label}</span>`;
}

const planStepTitle = (s) => s.state === 'done' ? `step ${s.n}: ${s.verdict || ''}` : s.state;

function Plan({ p, attempts }) {
  const running = p.span.status === 'running';
  return html`<div class="a-item a-plan" data-testid="a-plan" data-plan=${p.n}>
    <div class="a-head"><span class="a-kind">${p.replan ? 'new plan' : 'plan'} ${p.n ?? ''}</span>
      ${p.tries > 1 ? html`<span class="a-note" title="the planner was asked again after a malformed plan">${p.tries} tries</span>` : null}
      <span class="a-status">${running ? 'planning…' : p.span.status === 'error' ? 'failed' : `${p.steps.length} step${p.steps.length === 1 ? '' : 's'}`}</span></div>
    ${p.steps.length ? html`<ol class="a-plansteps">${p.steps.map((s) => html`<li class=${'ps ps-' + s.state + (s.verdict ? ' v-' + s.verdict : '')}
        data-step=${s.id} data-state=${s.state} title=${planStepTitle(s)}>${s.verdict ? html`<span class="vicon">${VERDICTS[s.verdict].icon}</span> ` : null}${s.id}</li>`)}</ol>` : null}
    <${Spans} nodes=${p.children} attempts=${attempts} />
  </div>`;
}

function Diff({ d, attempts }) {
  const title = d.adjustKind === 'replan' ? `replan ${d.n ?? ''}` : 'adjustment';
  return html`<div class=${'a-item a-adjust k-' + d.adjustKind} data-testid="a-diff" data-kind=${d.adjustKind}>
    <div class="a-head"><span class="a-kind">${d.adjustKind === 'replan' ? VERDICTS.replan.icon : VERDICTS.adjust.icon} ${title}</span>
      ${d.afterStep != null ? html`<span class="a-note">after step ${d.afterStep}</span>` : null}
      <span class="a-status">−${d.removed.length} +${d.added.length}</span></div>
    ${d.reasoning ? html`<div class="a-why">${d.reasoning}</div>` : null}
    <div class="diff">
      <span class="diff-label">before</span><span class="diff-ids" data-testid="diff-before">${d.before.length ? d.before.map((id) =>
        html`<span class=${d.removed.includes(id) ? 'did removed' : 'did'} data-removed=${d.removed.includes(id) ? 'true' : null}>${d.removed.includes(id) ? '− ' : ''}${id}</span>`) : html`<i>nothing left</i>`}</span>
      <span class="diff-label">after</span><span class="diff-ids" data-testid="diff-after">${d.after.length ? d.after.map((id) =>
        html`<span class=${d.added.includes(id) ? 'did added' : 'did'} data-added=${d.added.includes(id) ? 'true' : null}>${d.added.includes(id) ? '+ ' : ''}${id}</span>`) : html`<i>no steps (the plan ends)</i>`}</span>
    </div>
    <${Spans} nodes=${d.children} attempts=${attempts} />
  </div>`;
}

/** Step is one executed step: its header, verdict with reasoning, and its own span subtree. */
function Step({ st, attempts, pending }) {
  const waiting = pending && pending.step === st;
  return html`<div class=${`a-item a-step s-${st.span.status}${waiting ? ' waiting' : ''}`} data-testid="a-step"
      data-step=${st.stepId} data-agent-step=${st.n} data-verdict=${st.verdict || ''}>
    <div class="a-head"><span class="a-kind">step ${st.n ?? ''}</span> <b class="a-stepid">${st.stepId}</b>
      ${st.executionType ? html`<span class="a-note">${st.executionType}</span>` : null}
      ${st.span.durationMs != null ? html`<span class="a-note">${ms(st.span.durationMs)}</span>` : null}
      <span class="a-status">${waiting ? html`<span class="verdict v-waiting">‖ waiting for approval</span>`
        : st.span.status === 'running' && !st.reflection ? 'running…' : html`<${Verdict} verdict=${st.verdict} reasoning=${st.reasoning} />`}</span></div>
    ${st.description ? html`<div class="a-desc">${st.description}</div>` : null}
    ${st.verdict ? html`<div class=${'a-why v-' + st.verdict} data-testid="reasoning">${st.reasoning}</div>` : null}
    ${st.paused && !waiting ? html`<div class="a-note" data-testid="was-paused" data-decision=${st.review?.decision || ''}>‖ paused for approval here${st.review
      ? html`; <b class=${st.review.decision}>${st.review.decision}</b>${st.review.reviewer ? ` by ${st.review.reviewer}` : ''}${st.review.reason ? `: ${st.review.reason}` : ''}` : ''}</div>` : null}
    ${waiting ? html`<${Approval} p=${pending} />` : null}
    <${Spans} nodes=${st.children} attempts=${attempts} open=${st.span.status === 'running' || waiting} />
  </div>`;
}

const countSpans = (nodes) => nodes.reduce((n, c) => n + 1 + countSpans(c.children || []), 0);

/** Spans is an item's own span subtree (tree.js), folded unless open. */
function Spans({ nodes, attempts, open = false }) {
  if (!nodes?.length) return null;
  const n = countSpans(nodes);
  return html`<details class="a-spans" open=${open}><summary>${n} span${n === 1 ? '' : 's'}</summary>
    <${Nested} nodes=${nodes} depth=${1} attempts=${attempts} /></details>`;
}

function Evaluation({ e, attempts }) {
  const v = e.achieved == null ? null : e.achieved;
  return html`<div class=${'a-item a-eval' + (v === true ? ' achieved' : v === false ? ' missed' : '')} data-testid="a-eval"
      data-achieved=${v == null ? '' : String(v)}>
    <div class="a-head"><span class="a-kind">goal evaluation</span>
      <span class="a-status">${v == null ? (e.span.status === 'running' ? 'evaluating…' : '—')
        : html`<span class=${'verdict ' + (v ? 'v-pass' : 'v-fail')}><span class="vicon">${v ? '✓' : '✗'}</span> goal ${v ? 'achieved' : 'not achieved'}</span>`}</span></div>
    ${e.reasoning ? html`<div class="a-why">${e.reasoning}</div>` : null}
    <${Spans} nodes=${e.children} attempts=${attempts} />
  </div>`;
}

/** Timeline is one agent's plans, steps, diffs and evaluation, in the order they happened. */
function Timeline({ items, attempts, pending }) {
  if (!items.length) return html`<div class="a-empty">no plan yet</div>`;
  return html`<div class="a-timeline">${items.map((it) => {
    if (it.kind === 'plan') return html`<${Plan} p=${it} attempts=${attempts} key=${it.span.id} />`;
    if (it.kind === 'step') return html`<${Step} st=${it} attempts=${attempts} pending=${pending} key=${it.span.id} />`;
    if (it.kind === 'adjust') return html`<${Diff} d=${it} attempts=${attempts} key=${it.span.id} />`;
    return html`<${Evaluation} e=${it} attempts=${attempts} key=${it.span.id} />`;
  })}</div>`;
}

const args = (a) => {
  if (typeof a === 'string') { try { return JSON.stringify(JSON.parse(a), null, 2); } catch { return a; } }
  return JSON.stringify(a ?? {}, null, 2);
};

/** useNow re-renders every second, for the live waiting time and time left. */
function useNow() {
  const [now, setNow] = useState(Date.now());
  useEffect(() => { const t = setInterval(() => setNow(Date.now()), 1000); return () => clearInterval(t); }, []);
  return now;
}

/** Approval is the pulsing node of a paused run: the proposed calls, the agent's reasoning,
 * how long it has waited and how long is left, Approve and Reject (with a reason). */
function Approval({ p }) {
  const now = useNow();
  const [rejecting, setRejecting] = useState(false);
  const { reason, setReason, busy, error, send } = useReview(p.jobId, p.onDecided);
  const deadline = p.deadline ? new Date(p.deadline).getTime() : null;
  const left = deadline != null ? deadline - now : null;
  return html`<div class="approval" data-testid="approval">
    <div class="a-head"><span class="a-kind">‖ waits for approval</span>
      ${p.since ? html`<span class="a-note">waiting <b data-testid="waiting">${duration(now - new Date(p.since).getTime())}</b></span>` : null}
      <span class="a-note">${left == null ? html`<span data-testid="time-left" data-left="">no deadline</span>`
        : left > 0 ? html`<b data-testid="time-left" data-left=${Math.round(left / 1000)} title=${'approval deadline ' + new Date(deadline).toLocaleString()}>${duration(left)}</b> left`
          : html`<b data-testid="time-left" data-left="0" class="late">deadline passed</b>`}</span></div>
    ${(p.tools || []).map((c) => html`<div class="proposed" data-testid="proposed" data-tool=${c.tool}>
      <div>proposed call <b>${c.tool}</b></div><pre data-testid="arguments">${args(c.arguments)}</pre></div>`)}
    ${p.reasoning ? html`<div class="a-why" data-testid="agent-reasoning"><span class="a-note">the agent's reasoning:</span> ${p.reasoning}</div>` : null}
    ${rejecting
      ? html`<form class="decide-node" onSubmit=${(e) => { e.preventDefault(); send('reject'); }}>
          <input name="reason" placeholder="reason (required)" value=${reason} onInput=${(e) => setReason(e.target.value)} required />
          <button class="danger" disabled=${busy || !reason.trim()} data-testid="reject-confirm">Reject</button>
          <button type="button" class="link" onClick=${() => setRejecting(false)}>cancel</button></form>`
      : html`<div class="decide-node">
          <button disabled=${busy} onClick=${() => send('approve')} data-testid="approve-call">Approve</button>
          <button class="danger" disabled=${busy} onClick=${() => setRejecting(true)} data-testid="reject-call">Reject</button></div>`}
    <${ErrorBox} error=${error} />
  </div>`;
}

function Judge({ j, agents }) {
  const chosen = agents.find((a) => a.agent === j.chosen);
  return html`<div class=${'a-item a-judge s-' + j.span.status} data-testid="a-judge" data-chosen=${j.chosen ?? ''}>
    <div class="a-head"><span class="a-kind">⚖ ${j.chosen == null ? 'synthesis' : 'judge'}</span>
      ${j.pattern ? html`<span class="a-note">${j.pattern}</span>` : null}
      <span class="a-status">${j.chosen != null ? html`chose <b data-testid="chosen">agent ${j.chosen}${chosen?.role && chosen.role !== 'agent' ? ` (${chosen.role})` : ''}</b>`
        : j.span.status === 'running' ? 'judging…' : ''}${j.tie ? html` <span class="a-note" data-testid="tie">after a tie</span>` : null}</span></div>
    ${j.reasoning ? html`<div class="a-why" data-testid="judge-reasoning">${j.reasoning}</div>` : null}
    ${j.votes.length ? html`<table class="votes" data-testid="votes"><thead><tr><th>answer</th><th>votes</th><th>agents</th></tr></thead>
      <tbody>${j.votes.map((v) => html`<tr class=${v.agents.includes(j.chosen) ? 'won' : ''}><td>${v.answer}</td><td>${v.agents.length}</td>
        <td>${v.agents.join(', ')}</td></tr>`)}</tbody></table>` : null}
    <${Spans} nodes=${j.children} />
  </div>`;
}

/** Agents draws a pattern's agents side by side, one column each, the chosen one marked. */
function Agents({ model, attempts, pending }) {
  return html`<div class="agents" data-testid="agents" style=${`grid-template-columns: repeat(${model.agents.length}, minmax(260px, 1fr))`}>
    ${model.agents.map((a) => html`<div class=${`agent-col s-${a.span.status}${a.chosen ? ' chosen' : ''}`} data-testid="agent"
        data-agent=${a.agent ?? ''} data-role=${a.role || ''} data-chosen=${a.chosen ? 'true' : 'false'} key=${a.span.id}>
      <div class="agent-head"><b>agent ${a.agent ?? '?'}</b>${a.role && a.role !== 'agent' ? html` <span class="a-role">${a.role}</span>` : null}
        ${a.chosen ? html`<span class="chosen-tag" data-testid="chosen-tag">★ chosen</span>` : null}
        <div class="a-note">${[a.temperature != null ? `temperature ${+a.temperature.toFixed(2)}` : null, a.round != null ? `round ${a.round}` : null,
          a.span.status].filter(Boolean).join(' · ')}</div></div>
      <${Timeline} items=${a.timeline} attempts=${attempts} pending=${pending} />
    </div>`)}
  </div>`;
}

/**
 * AgentRun is the tier 4 view of spans. pending, while the run waits for approval, is
 * {jobId, agentStep, agent (a pattern's agent, when the pause names one), tools, reasoning,
 * since, deadline, onDecided}; reviews are the decisions
 * on its pauses in order ({decision, reviewer, reason}), told to the paused steps in order.
 */
export function AgentRun({ spans, attempts, pending, reviews = [] }) {
  const model = agentModel(spans);
  const paused = [model.timeline, ...model.agents.map((a) => a.timeline)].flat()
    .filter((i) => i.kind === 'step' && i.paused).sort((x, y) => new Date(x.span.startedAt) - new Date(y.span.startedAt));
  paused.forEach((st, k) => { st.review = reviews[k] || null; });
  const at = pending ? pendingStep(model, pending.agentStep, pending.agent) : null;
  const p = pending ? { ...pending, step: at } : null;
  return html`<div class="agentrun" data-testid="agentrun" data-pattern=${model.pattern || ''}>
    ${model.pattern && model.pattern !== 'execute' ? html`<div class="a-pattern">pattern <b>${model.pattern}</b> · ${model.agents.length} agents</div>` : null}
    ${model.timeline.length || !model.agents.length ? html`<${Timeline} items=${model.timeline} attempts=${attempts} pending=${p} />` : null}
    ${model.agents.length ? html`<${Agents} model=${model} attempts=${attempts} pending=${p} />` : null}
    ${model.judge ? html`<${Judge} j=${model.judge} agents=${model.agents} />` : null}
    ${p && !at ? html`<div class="a-item a-step waiting" data-testid="a-step" data-step=${pending.stepId || ''}>
      <div class="a-head"><span class="a-kind">step ${pending.agentStep ?? ''}</span> <b>${pending.stepId || ''}</b></div>
      <${Approval} p=${p} /></div>` : null}
  </div>`;
}
