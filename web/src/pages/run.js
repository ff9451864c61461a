import { useEffect, useMemo, useState } from 'preact/hooks';
import { api } from '../api.js';
import { openStream } from '../stream.js';
import { SpanTree } from '../tree.js';
import { ChainView } from './chain.js';
import { html, ErrorBox, Loading, Empty, StatusBadge, ConnBadge, TERMINAL, usd, when, ms } from '../ui.js';

const STATUS_EVENTS = new Set(['job:queued', 'job:held', 'job:approved', 'job:rejected', 'job:started',
  'job:completed', 'job:failed', 'job:cancelled', 'job:retrying', 'job:pending_review']);

// holdText is why a run was held: a governance reason, or a tool call held for approval.
const holdText = (r) => r.reason || r.detector || (r.tool ? `${r.tool} (${r.code || 'held'})` : JSON.stringify(r));

/** RunView is one run's page: a chain's parent run shows its chain (pages/chain.js), any
 * other run its span tree. */
export function RunView({ id }) {
  const [first, setFirst] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => { api('GET', '/dispatch/' + id).then(setFirst, setError); }, [id]);
  if (error) return html`<section><p><a href="#/runs">← runs</a></p><${ErrorBox} error=${error} /></section>`;
  if (!first) return html`<${Loading} what="run" />`;
  if (first.chainId && !first.chainStep) return html`<${ChainView} chainId=${first.chainId} />`;
  return html`<${JobView} id=${id} initial=${first} />`;
}

/** JobView is one run: its span tree growing live, its events, billing and cancel. */
function JobView({ id, initial }) {
  const [run, setRun] = useState(initial);
  const [error, setError] = useState(null);
  const [spans, setSpans] = useState(new Map());
  const [events, setEvents] = useState([]);
  const [conn, setConn] = useState({ state: 'connecting' });
  const [note, setNote] = useState(null);
  // The last job:pending_review: what a paused autonomous run waits on, and since when.
  const [paused, setPaused] = useState(null);
  // Reviews of pauses (job:approved / job:rejected from pending_review), in order.
  const [reviews, setReviews] = useState([]);

  const reload = () => api('GET', '/dispatch/' + id).then(setRun, setError);
  useEffect(() => {
    const s = openStream({ job_id: id }, (env) => {
      setEvents((list) => [...list.slice(-199), env]);
      if (env.type === 'job:span' && env.data?.id) setSpans((m) => new Map(m).set(env.data.id, env.data));
      if (env.type === 'job:pending_review') setPaused({ ...env.data, since: env.ts });
      if ((env.type === 'job:approved' || env.type === 'job:rejected') && env.data?.from_status === 'pending_review') {
        setReviews((l) => [...l, { decision: env.type === 'job:approved' ? 'approved' : 'rejected', reviewer: env.data.reviewer, reason: env.data.reason }]);
      }
      if (STATUS_EVENTS.has(env.type)) reload();
    }, (state, detail) => setConn({ state, detail }));
    return () => s.close();
  }, [id]);

  const list = useMemo(() => [...spans.values()], [spans]);
  const total = list.reduce((sum, s) => sum + (s.type === 'llm_call' && s.billing ? s.billing.costUsd || 0 : 0), 0);
  const tokens = list.reduce((sum, s) => sum + (s.billing ? (s.billing.tokensIn || 0) + (s.billing.tokensOut || 0) : 0), 0);

  const cancel = async () => {
    setNote(null);
    try {
      const res = await api('POST', `/dispatch/${id}/cancel`);
      setNote(`Cancel: ${res.status || 'requested'}`);
      reload();
    } catch (err) { setError(err); }
  };

  // While the run waits for approval, its tree shows where, with Approve and Reject.
  const pending = run?.status === 'pending_review' && run.executionType === 'autonomous' ? {
    jobId: id, agentStep: paused?.agent_step, agent: paused?.agent, stepId: paused?.step_id,
    tools: paused?.tools || (run.holdReasons || []).filter((r) => r.tool),
    reasoning: paused?.reasoning || '', since: paused?.since, deadline: run.approvalDeadline,
    onDecided: (what) => { setNote(what === 'approve' ? 'Approved: the run goes on.' : 'Rejected: the agent is told why and goes on.'); reload(); },
  } : null;

  if (error && !run) return html`<section><p><a href="#/runs">← runs</a></p><${ErrorBox} error=${error} /></section>`;
  if (!run) return html`<${Loading} what="run" />`;
  return html`<section class="run">
    <p><a href="#/runs">← runs</a></p>
    <div class="titlebar"><h2>${run.jobType} <small>${run.jobId}</small></h2><${ConnBadge} ...${conn} /></div>
    <div class="facts">
      <span>status <${StatusBadge} status=${run.status} /></span>
      <span>tier <b data-testid="tier">${run.executionType}</b></span>
      <span>queue <b>${run.queue}</b></span><span>priority <b>${run.priority}</b></span>
      ${run.attempts > 1 ? html`<span title="the run was resumed or retried; each span names its attempt">attempts <b data-testid="attempts">${run.attempts}</b></span>` : null}
      <span>created ${when(run.timings.createdAt)}</span>
      ${run.timings.durationMs != null ? html`<span>took ${ms(run.timings.durationMs)}</span>` : null}
      <span class="total" data-testid="total">running total <b>${usd(Math.max(total, TERMINAL.has(run.status) ? run.billing.costUsd : 0))}</b> · ${tokens} tokens</span>
      ${!TERMINAL.has(run.status) ? html`<button class="danger" onClick=${cancel} data-testid="cancel">Cancel run</button>` : null}
    </div>
    ${run.chainStep ? html`<div class="banner info" data-testid="chain-step">Step <b>${run.chainStep}</b> of chain
      <a href=${'#/chains/' + run.chainId}>${run.chainId}</a></div>` : null}
    ${note ? html`<div class="banner info" data-testid="note">${note}</div>` : null}
    <${ErrorBox} error=${error} />
    ${run.holdReasons?.length && !pending ? html`<div class="banner warn">Held: ${run.holdReasons.map(holdText).join('; ')}</div>` : null}
    ${run.error ? html`<div class="banner error"><strong>${run.error.code}</strong> ${run.error.message}</div>` : null}
    <h3>Span tree</h3>
    ${list.length ? html`<${SpanTree} spans=${list} executionType=${run.executionType} pending=${pending} reviews=${reviews} />`
      : conn.state === 'live' ? html`<${Empty}>No spans yet: the run has not started.</${Empty}>` : html`<${Loading} what="spans" />`}
    ${run.output ? html`<h3>Output</h3><pre class="output" data-testid="output">${JSON.stringify(run.output, null, 2)}</pre>` : null}
    <details><summary>Events (${events.length})</summary>
      <table class="events"><tbody>${events.map((e) => html`<tr><td>${e.seq}</td><td>${e.type}</td><td>${when(e.ts)}</td></tr>`)}</tbody></table>
    </details>
  </section>`;
}
