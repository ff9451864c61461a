// A chain run (Tier 3): its DAG drawn live from GET /api/v1/chains/{id} and the chain's
// stream, with fork/join counters, progress, cost per step and in total, Approve/Reject on
// held steps, Cancel and Re-run, and each step drilling into its own run's span tree.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { openStream } from '../stream.js';
import { SpanTree } from '../tree.js';
import { layoutChain, counters, MAX_CHIPS } from '../dag.js';
import { html, ErrorBox, Loading, StatusBadge, ConnBadge, usd, when } from '../ui.js';

// Events after which the chain is fetched again: the coordinator's, and a run's status
// changes (a step's run starting, being held or approved, ending).
const REFETCH = new Set(['job:queued', 'job:held', 'job:approved', 'job:rejected', 'job:started', 'job:completed',
  'job:failed', 'job:cancelled', 'job:retrying', 'job:waiting']);
/** REFETCH_GAP is the least time between two fetches of the chain: a burst of events costs one. */
const REFETCH_GAP = 150;

/** throttled returns a function that calls fn at most once per gap ms (trailing), never two at once. */
function throttled(fn, gap) {
  let timer = null;
  let running = false;
  let again = false;
  let lastAt = 0;
  const run = async () => {
    timer = null;
    running = true;
    again = false;
    lastAt = Date.now();
    try { await fn(); } finally {
      running = false;
      if (again) schedule();
    }
  };
  const schedule = () => {
    if (running) { again = true; return; }
    if (timer) return;
    timer = setTimeout(run, Math.max(0, lastAt + gap - Date.now()));
  };
  schedule.cancel = () => clearTimeout(timer);
  return schedule;
}

/** HELD are the statuses a reviewer decides: held before it ran, or paused mid-run. */
const HELD = new Set(['held_for_review', 'pending_review']);

const stepKey = (s) => (s.instance != null ? `${s.stepId}[${s.instance}]` : s.stepId);

/** Decide is Approve and Reject (with its required reason) for a held step's run. */
function Decide({ jobId, onDone, onError }) {
  const [rejecting, setRejecting] = useState(false);
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const send = async (what) => {
    setBusy(true);
    try {
      await api('POST', `/dispatch/${jobId}/${what}`, { reason });
      onDone(what);
    } catch (err) { onError(err); } finally { setBusy(false); }
  };
  const stop = (e) => e.stopPropagation();
  if (rejecting) {
    return html`<form class="decide-node" onClick=${stop} onSubmit=${(e) => { e.preventDefault(); send('reject'); }}>
      <input name="reason" placeholder="reason (required)" value=${reason} onInput=${(e) => setReason(e.target.value)} required />
      <button class="danger" disabled=${busy || !reason.trim()} data-testid="reject-confirm">Reject</button>
      <button type="button" class="link" onClick=${() => setRejecting(false)}>×</button></form>`;
  }
  return html`<div class="decide-node" onClick=${stop}>
    <button disabled=${busy} onClick=${() => send('approve')} data-testid="approve-step">Approve</button>
    <button class="danger" disabled=${busy} onClick=${() => setRejecting(true)} data-testid="reject-step">Reject</button></div>`;
}

function StepNode({ n, byId, selected, onSelect, onDecided, onError }) {
  const cs = counters(n, byId);
  const single = n.instances.length ? null : n.steps[0];
  const held = single && HELD.has(single.status) && single.jobId;
  const err = single?.error?.code;
  return html`<div class=${`cnode cs-${n.status}${selected === n.id ? ' selected' : ''}${n.forEach ? ' group' : ''}`}
      style=${`left:${n.x}px;top:${n.y}px;width:${n.w}px;height:${n.h}px`}
      data-step=${n.id} data-status=${n.status} data-job=${single?.jobId || ''}
      role="button" tabIndex="0" aria-label=${`step ${n.id}: ${n.status}`}
      onClick=${() => onSelect(n.id, null)} onKeyDown=${(e) => { if (e.target === e.currentTarget && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); onSelect(n.id, null); } }}
      title=${`${n.id}: ${n.status}`}>
    <div class="cn-head"><b class="cn-id">${n.id}</b>${n.forEach ? html`<span class="cn-tag">for_each ×${n.count ?? '?'}</span>` : null}</div>
    <div class="cn-type">${n.jobType}${single?.attempt > 1 ? html` · attempt ${single.attempt}` : null}${single?.reused ? ' · reused' : null}</div>
    <div class="cn-status"><span class="cn-st" data-testid="step-status">${n.status.replaceAll('_', ' ')}</span>
      <span class="cn-cost" data-testid="step-cost">${usd(n.costUsd)}</span></div>
    ${cs.length ? html`<div class="cn-counters">${cs.map((c) => html`<span class=${'counter ' + c.kind} data-testid=${'counter-' + c.kind}>${c.kind === 'instances' ? '' : c.kind + ' '}${c.text}</span>`)}</div>` : null}
    ${held ? html`<${Decide} jobId=${single.jobId} onDone=${(what) => onDecided(n.id, what)} onError=${onError} />` : null}
    ${err && !held ? html`<div class="cn-err">${err}</div>` : null}
    ${n.instances.length ? html`<div class="chips">${n.instances.slice(0, MAX_CHIPS).map((s) => html`<button type="button"
        class=${`chip cs-${s.status}${selected === stepKey(s) ? ' selected' : ''}`} data-instance=${s.instance} data-status=${s.status}
        title=${`${stepKey(s)}: ${s.status} · ${usd(s.costUsd)}`}
        onClick=${(e) => { e.stopPropagation(); onSelect(n.id, s.instance); }}>${s.instance}</button>`)}
      ${n.instances.length > MAX_CHIPS ? html`<span class="more">+${n.instances.length - MAX_CHIPS}</span>` : null}</div>` : null}
  </div>`;
}

/** ChainDag draws the laid-out chain: an SVG of edges under HTML nodes. */
function ChainDag({ chain, selected, onSelect, onDecided, onError }) {
  const lay = useMemo(() => layoutChain(chain.steps), [chain]);
  const byId = new Map(lay.nodes.map((n) => [n.id, n]));
  return html`<div class="chaindag-wrap"><div class="chaindag" data-testid="chain-dag" style=${`width:${lay.width}px;height:${lay.height}px`}>
    <svg width=${lay.width} height=${lay.height} aria-hidden="true">
      <defs><marker id="carr" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" /></marker></defs>
      ${lay.edges.map((e) => html`<path class=${'cedge from-' + e.status} d=${e.d} marker-end="url(#carr)" data-edge=${`${e.from}>${e.to}`} />`)}
    </svg>
    ${lay.nodes.map((n) => html`<${StepNode} key=${n.id} n=${n} byId=${byId} selected=${selected} onSelect=${onSelect} onDecided=${onDecided} onError=${onError} />`)}
  </div></div>`;
}

/** StepDetail is the selected step (or instance): its run's facts and its span tree. */
function StepDetail({ step, spans, onDecided, onError }) {
  const [run, setRun] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    setRun(null);
    setError(null);
    if (step.jobId) api('GET', '/dispatch/' + step.jobId).then(setRun, setError);
  }, [step.jobId, step.status]);
  const list = [...(spans?.values() || [])]; // the Map grows in place as spans arrive
  return html`<div class="stepdetail" data-testid="step-detail" data-step=${stepKey(step)}>
    <h3>Step ${stepKey(step)} <small>${step.jobType}</small> <${StatusBadge} status=${step.status} /></h3>
    <div class="facts">
      ${step.jobId ? html`<span>run <a href=${'#/runs/' + step.jobId}>${step.jobId}</a></span>` : html`<span>no run: ${step.status === 'pending' ? 'waits for its parents' : 'never dispatched'}</span>`}
      <span>depends on <b>${step.dependsOn?.length ? step.dependsOn.join(', ') : '—'}</b></span>
      ${step.attempt ? html`<span>attempt <b>${step.attempt}</b></span>` : null}
      ${step.reused ? html`<span>output reused from the chain it re-runs</span>` : null}
      <span>started ${when(step.startedAt)}</span><span>finished ${when(step.finishedAt)}</span>
      <span class="total">cost <b>${usd(step.costUsd)}</b></span>
      ${HELD.has(step.status) && step.jobId ? html`<${Decide} jobId=${step.jobId} onDone=${(w) => onDecided(stepKey(step), w)} onError=${onError} />` : null}
    </div>
    <${ErrorBox} error=${error} />
    ${run?.holdReasons?.length ? html`<div class="banner warn">Held: ${run.holdReasons.map((r) => r.reason || r.check || r.detector || JSON.stringify(r)).join('; ')}</div>` : null}
    ${step.error ? html`<div class="banner error"><strong>${step.error.code || 'ERROR'}</strong> ${step.error.message || JSON.stringify(step.error)}</div>` : null}
    ${list.length ? html`<${SpanTree} spans=${list} executionType=${run?.executionType} />`
      : html`<div class="state empty">No spans yet${step.jobId ? '' : ': the step has no run'}.</div>`}
    ${step.output ? html`<h4>Output</h4><pre class="output" data-testid="step-output">${JSON.stringify(step.output, null, 2)}</pre>` : null}
  </div>`;
}

/** ChainView is one chain, live: header, DAG, the selected step, all steps, events. */
export function ChainView({ chainId }) {
  const [chain, setChain] = useState(null);
  const [run, setRun] = useState(null);
  const [error, setError] = useState(null);
  const [conn, setConn] = useState({ state: 'connecting' });
  const [note, setNote] = useState(null);
  const [sel, setSel] = useState(null); // {stepId, instance}
  const [events, setEvents] = useState([]);
  const [, setTick] = useState(0);
  const spans = useRef(new Map()); // run id -> Map(span id -> span)
  const parentId = useRef(null);

  const fetchChain = async () => {
    try {
      const c = await api('GET', '/chains/' + chainId);
      setChain(c);
      setError(null);
      if (parentId.current !== c.jobId) parentId.current = c.jobId;
    } catch (err) { setError(err); }
  };
  const fetchRun = async () => {
    if (!parentId.current) return;
    try { setRun(await api('GET', '/dispatch/' + parentId.current)); } catch { /* the chain's own status is shown */ }
  };
  const refresh = useMemo(() => throttled(async () => { await fetchChain(); await fetchRun(); }, REFETCH_GAP), [chainId]);

  useEffect(() => {
    refresh();
    let repaint = 0;
    let reconnects = 0;
    const s = openStream({ chain_id: chainId }, (env) => {
      if (env.type === 'job:span' && env.data?.id) {
        const m = spans.current.get(env.job_id) || new Map();
        m.set(env.data.id, env.data);
        spans.current.set(env.job_id, m);
        // Many spans arrive in a burst on replay: draw once per frame.
        if (!repaint) repaint = requestAnimationFrame(() => { repaint = 0; setTick((t) => t + 1); });
        return;
      }
      setEvents((list) => [...list.slice(-199), env]);
      if (env.type === 'chain:progress' && env.data) {
        setChain((c) => (c ? { ...c, progress: env.data.progress ?? c.progress, costUsd: env.data.costUsd ?? c.costUsd } : c));
      }
      if (env.type.startsWith('chain:') || REFETCH.has(env.type)) refresh();
    }, (state, detail) => {
      setConn({ state, detail });
      if (state === 'live' && reconnects++ > 0) refresh();
    });
    return () => { s.close(); refresh.cancel(); cancelAnimationFrame(repaint); };
  }, [chainId]);

  const act = async (what) => {
    setNote(null);
    try {
      const res = await api('POST', `/chains/${chainId}/${what}`);
      if (what === 'rerun') {
        location.hash = '#/runs/' + res.jobId;
        return;
      }
      setNote(`Cancel: ${res.status || 'requested'}`);
      refresh();
    } catch (err) { setError(err); }
  };
  const onDecided = (step, what) => { setNote(`${what === 'approve' ? 'Approved' : 'Rejected'} step ${step}.`); refresh(); };
  const onSelect = (stepId, instance) => setSel({ stepId, instance });

  if (error && !chain) return html`<section><p><a href="#/runs">← runs</a></p><${ErrorBox} error=${error} /></section>`;
  if (!chain) return html`<${Loading} what="chain" />`;

  const selStep = sel && (chain.steps.find((s) => s.stepId === sel.stepId && (sel.instance == null ? true : s.instance === sel.instance)));
  const selKey = sel ? (sel.instance != null ? `${sel.stepId}[${sel.instance}]` : sel.stepId) : null;
  const running = chain.status === 'running';
  const pct = Math.round((chain.progress || 0) * 100);
  const counts = chain.steps.reduce((m, s) => ({ ...m, [s.status]: (m[s.status] || 0) + 1 }), {});
  const allSpans = [...spans.current.values()].flatMap((m) => [...m.values()]);
  return html`<section class="run chain" data-chain=${chain.chainId}>
    <p><a href="#/runs">← runs</a></p>
    <div class="titlebar"><h2>${chain.jobType} <small>chain ${chain.chainId}</small></h2><${ConnBadge} ...${conn} /></div>
    <div class="facts">
      <span data-testid="chain-status" data-status=${chain.status}>chain <${StatusBadge} status=${chain.status} /></span>
      <span>parent run <a href=${'#/runs/' + chain.jobId}>${chain.jobId.slice(-8)}</a>${run ? html` <${StatusBadge} status=${run.status} />` : null}</span>
      <span>on failure <b>${chain.onFailure}</b></span>
      ${chain.rerunOf ? html`<span>re-run of <a href=${'#/chains/' + chain.rerunOf}>${chain.rerunOf.slice(-8)}</a></span>` : null}
      <span>created ${when(chain.createdAt)}</span>
      <span class="total">total <b data-testid="chain-cost">${usd(chain.costUsd)}</b>${chain.costCeilingUsd != null ? html` of ${usd(chain.costCeilingUsd)}` : null}</span>
      ${running ? html`<button class="danger" onClick=${() => act('cancel')} data-testid="chain-cancel">Cancel chain</button>`
        : html`<button onClick=${() => act('rerun')} data-testid="chain-rerun" title="a new chain that reuses the completed steps' outputs and runs the others again">Re-run</button>`}
    </div>
    <div class="progress" data-testid="progress" data-progress=${chain.progress} title=${`${pct}% (weighted by each step's timeout)`}>
      <div class="bar" style=${`width:${pct}%`}></div><span>${pct}% · ${Object.entries(counts).map(([k, v]) => `${v} ${k.replaceAll('_', ' ')}`).join(' · ')}</span>
    </div>
    ${note ? html`<div class="banner info" data-testid="note">${note}</div>` : null}
    <${ErrorBox} error=${error} />
    ${chain.error ? html`<div class="banner error"><strong>${chain.error.code || 'ERROR'}</strong> ${chain.error.message || ''}</div>` : null}
    <${ChainDag} chain=${chain} selected=${selKey} onSelect=${onSelect} onDecided=${onDecided} onError=${setError} />
    ${selStep ? html`<${StepDetail} key=${selKey} step=${selStep} spans=${selStep.jobId ? spans.current.get(selStep.jobId) : null}
        onDecided=${onDecided} onError=${setError} />`
      : html`<p class="hint">Click a step to see its run's span tree.</p>`}
    <h3>Steps</h3>
    <table class="steps-table" data-testid="steps-table"><thead><tr><th>step</th><th>skill</th><th>status</th><th>depends on</th><th>attempt</th><th>started</th><th>finished</th><th>cost</th></tr></thead>
      <tbody>${chain.steps.map((s) => html`<tr data-step=${stepKey(s)} onClick=${() => onSelect(s.stepId, s.instance ?? null)}>
        <td>${s.jobId ? html`<a href=${'#/runs/' + s.jobId} onClick=${(e) => e.stopPropagation()}>${stepKey(s)}</a>` : stepKey(s)}</td><td>${s.jobType}</td>
        <td><${StatusBadge} status=${s.status} /></td><td>${(s.dependsOn || []).join(', ') || '—'}</td><td>${s.attempt || '—'}</td>
        <td>${when(s.startedAt)}</td><td>${when(s.finishedAt)}</td><td>${usd(s.costUsd)}</td></tr>`)}</tbody>
      <tfoot><tr><td colspan="7">total</td><td>${usd(chain.costUsd)}</td></tr></tfoot></table>
    ${run?.output ? html`<h3>Output</h3><pre class="output" data-testid="output">${JSON.stringify(run.output, null, 2)}</pre>` : null}
    <details><summary>Chain span tree (${allSpans.length} spans)</summary>
      ${allSpans.length ? html`<${SpanTree} spans=${allSpans} executionType="chain" dag=${false} />` : null}</details>
    <details><summary>Events (${events.length})</summary>
      <table class="events"><tbody>${events.map((e) => html`<tr><td>${e.job_id === chain.jobId ? 'chain' : e.job_id.slice(-8)}</td><td>${e.seq}</td><td>${e.type}</td><td>${e.data?.stepId || ''}</td><td>${when(e.ts)}</td></tr>`)}</tbody></table>
    </details>
  </section>`;
}
