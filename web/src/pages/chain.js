// A chain run (Tier 3): its DAG drawn live from GET /api/v1/chains/{id} and the chain's
// stream, with fork/join counters, progress, cost per step and in total, Approve/Reject on
// held steps, Cancel and Re-run, and each step drilling into its own run's span tree. A
// workflow run (a chain with `workflow`) is drawn as its DAG of jobs instead, each job
// listing its steps, which drill into their runs' span trees the same way.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { useReview } from '../review.js';
import { openStream } from '../stream.js';
import { SpanTree } from '../tree.js';
import { layoutChain, layoutWorkflow, groupJobs, counters, stepName, reasonText, MAX_CHIPS } from '../dag.js';
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
  const { reason, setReason, busy, send } = useReview(jobId, onDone, onError);
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

/** Dag draws a laid-out DAG (layoutChain, layoutWorkflow): an SVG of edges under the HTML
 * nodes node(n, byId) gives. */
function Dag({ lay, testid, node }) {
  const byId = new Map(lay.nodes.map((n) => [n.id, n]));
  return html`<div class="chaindag-wrap"><div class="chaindag" data-testid=${testid} style=${`width:${lay.width}px;height:${lay.height}px`}>
    <svg width=${lay.width} height=${lay.height} aria-hidden="true">
      <defs><marker id="carr" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" /></marker></defs>
      ${lay.edges.map((e) => html`<path class=${'cedge from-' + e.status} d=${e.d} marker-end="url(#carr)" data-edge=${`${e.from}>${e.to}`} />`)}
    </svg>
    ${lay.nodes.map((n) => node(n, byId))}
  </div></div>`;
}

/** ChainDag draws the laid-out chain, a node per step. */
function ChainDag({ chain, selected, onSelect, onDecided, onError }) {
  const lay = useMemo(() => layoutChain(chain.steps), [chain]);
  return html`<${Dag} lay=${lay} testid="chain-dag" node=${(n, byId) => html`<${StepNode} key=${n.id} n=${n} byId=${byId}
    selected=${selected} onSelect=${onSelect} onDecided=${onDecided} onError=${onError} />`} />`;
}

/** JobNode is one job of a workflow run: its name, status or result, cost and, for a matrix
 * job, how many instances are done and a chip per instance. */
function JobNode({ n, byId, selected, onSelect }) {
  const cs = counters(n, byId);
  const steps = n.matrix ? (n.instances[0]?.steps.length || 0) : n.steps.length;
  const isSel = selected?.job === n.id;
  return html`<div class=${`cnode jnode cs-${n.status}${isSel && selected.instance == null ? ' selected' : ''}${n.matrix ? ' group' : ''}`}
      style=${`left:${n.x}px;top:${n.y}px;width:${n.w}px;height:${n.h}px`}
      data-wfjob=${n.id} data-status=${n.status} data-result=${n.result || ''}
      role="button" tabIndex="0" aria-label=${`job ${n.id}: ${n.result || n.status}`}
      onClick=${() => onSelect(n.id, null)} onKeyDown=${(e) => { if (e.target === e.currentTarget && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); onSelect(n.id, null); } }}
      title=${`job ${n.id}: ${n.result || n.status}`}>
    <div class="cn-head"><b class="cn-id" data-testid="job-name">${n.name}</b>${n.matrix ? html`<span class="cn-tag">matrix ×${n.count}</span>` : null}</div>
    <div class="cn-type">${n.name !== n.id ? html`${n.id} · ` : null}${steps} step${steps === 1 ? '' : 's'}${n.matrix ? ' each' : ''}</div>
    <div class="cn-status"><span class="cn-st" data-testid="job-status">${n.result || n.status.replaceAll('_', ' ')}${n.outcome && n.outcome !== n.result ? ` (outcome ${n.outcome})` : ''}</span>
      <span class="cn-cost" data-testid="job-cost">${usd(n.costUsd)}</span></div>
    ${cs.length ? html`<div class="cn-counters">${cs.map((c) => html`<span class=${'counter ' + c.kind} data-testid=${'counter-' + c.kind}>${c.kind === 'matrix' ? '' : c.kind + ' '}${c.text}</span>`)}</div>` : null}
    ${n.instances.length ? html`<div class="chips">${n.instances.slice(0, MAX_CHIPS).map((i) => html`<button type="button"
        class=${`chip cs-${i.status}${isSel && selected.instance === i.instance ? ' selected' : ''}`} data-instance=${i.instance} data-status=${i.status}
        title=${`instance ${i.instance}: ${i.status} · ${usd(i.costUsd)}`}
        onClick=${(e) => { e.stopPropagation(); onSelect(n.id, i.instance); }}>${i.instance}</button>`)}
      ${n.instances.length > MAX_CHIPS ? html`<span class="more">+${n.instances.length - MAX_CHIPS}</span>` : null}</div>` : null}
  </div>`;
}

/** WorkflowDag draws a workflow run's jobs, a node per job. */
function WorkflowDag({ chain, selected, onSelect }) {
  const lay = useMemo(() => layoutWorkflow(chain.workflow, chain.steps), [chain]);
  return html`<${Dag} lay=${lay} testid="workflow-dag" node=${(n, byId) => html`<${JobNode} key=${n.id} n=${n} byId=${byId}
    selected=${selected} onSelect=${onSelect} />`} />`;
}

/** JobSteps lists one job's (or matrix instance's) steps in order, each with its status and
 * why it ended as it did; a click selects the step (its span tree shows below). */
function JobSteps({ steps, selected, onSelect, onDecided, onError }) {
  return html`<ol class="jobsteps">${steps.map((s) => html`<li class=${`cs-${s.status}${selected === s.stepId ? ' selected' : ''}`}
      data-step=${s.stepId} data-status=${s.status} data-reason=${s.reason || ''} role="button" tabIndex="0"
      onClick=${() => onSelect(s.stepId)} onKeyDown=${(e) => { if (e.target === e.currentTarget && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); onSelect(s.stepId); } }}>
    <b>${stepName(s.stepId)}</b> <small>${s.jobType}</small> <${StatusBadge} status=${s.status} />
    ${s.reason ? html`<span class="reason" data-testid="step-reason">${reasonText(s.reason)}</span>` : null}
    ${s.error?.code ? html`<span class="cn-err">${s.error.code}</span>` : null}
    ${HELD.has(s.status) && s.jobId ? html`<${Decide} jobId=${s.jobId} onDone=${(w) => onDecided(s.stepId, w)} onError=${onError} />` : null}
    <span class="cn-cost">${usd(s.costUsd)}</span></li>`)}</ol>`;
}

/** JobDetail is the selected job: what it needs, its result and outputs, and its steps —
 * instance by instance in a matrix job (only the selected instance when one is). */
function JobDetail({ n, instance, stepId, onSelectStep, onDecided, onError }) {
  const insts = n.matrix ? n.instances.filter((i) => instance == null || i.instance === instance) : null;
  return html`<div class="stepdetail jobdetail" data-testid="job-detail" data-wfjob=${n.id}>
    <h3>Job ${n.name} ${n.name !== n.id ? html`<small>${n.id}</small>` : null} <${StatusBadge} status=${n.status} />
      ${n.result ? html`<span class="badge" data-testid="job-result">result ${n.result}</span>` : null}
      ${n.outcome && n.outcome !== n.result ? html`<span class="badge" data-testid="job-outcome"
        title="continue-on-error: the job failed, and concludes success so that what needs it runs">outcome ${n.outcome}</span>` : null}</h3>
    <div class="facts">
      <span>needs <b>${n.dependsOn.length ? n.dependsOn.join(', ') : '—'}</b></span>
      ${n.matrix ? html`<span>matrix <b>${n.instances.filter((i) => i.done).length}/${n.count}</b> instances done</span>` : null}
      <span class="total">cost <b>${usd(n.costUsd)}</b></span>
    </div>
    ${insts ? insts.map((i) => html`<div class="instance" data-instance=${i.instance}><h4>Instance ${i.instance} <${StatusBadge} status=${i.status} /> <small>${usd(i.costUsd)}</small></h4>
        <${JobSteps} steps=${i.steps} selected=${stepId} onSelect=${onSelectStep} onDecided=${onDecided} onError=${onError} /></div>`)
      : html`<${JobSteps} steps=${n.steps} selected=${stepId} onSelect=${onSelectStep} onDecided=${onDecided} onError=${onError} />`}
    ${n.outputs && Object.keys(n.outputs).length ? html`<h4>Outputs</h4><pre class="output" data-testid="job-outputs">${JSON.stringify(n.outputs, null, 2)}</pre>` : null}
  </div>`;
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
      ${step.job && step.reason ? html`<span data-testid="detail-reason">${reasonText(step.reason)}</span>` : null}
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
  // In a workflow run: a job (and a matrix instance of it), then one of its steps.
  const [wsel, setWsel] = useState(null); // {job, instance, stepId}
  const onSelectJob = (job, instance) => setWsel({ job, instance, stepId: null });

  if (error && !chain) return html`<section><p><a href="#/runs">← runs</a></p><${ErrorBox} error=${error} /></section>`;
  if (!chain) return html`<${Loading} what="chain" />`;

  const selStep = sel && (chain.steps.find((s) => s.stepId === sel.stepId && (sel.instance == null ? true : s.instance === sel.instance)));
  const selKey = sel ? (sel.instance != null ? `${sel.stepId}[${sel.instance}]` : sel.stepId) : null;
  const running = chain.status === 'running';
  const pct = Math.round((chain.progress || 0) * 100);
  const counts = chain.steps.reduce((m, s) => ({ ...m, [s.status]: (m[s.status] || 0) + 1 }), {});
  const allSpans = [...spans.current.values()].flatMap((m) => [...m.values()]);
  const wf = chain.workflow;
  const wfJob = wf && wsel ? groupJobs(wf, chain.steps).find((g) => g.id === wsel.job) : null;
  const wfStep = wfJob && wsel.stepId ? chain.steps.find((s) => s.stepId === wsel.stepId) : null;
  const wfOutputs = wf && chain.status !== 'running' ? run?.output?.outputs : null;
  const selectRow = (s) => (wf && s.job ? setWsel({ job: s.job, instance: s.matrix ?? null, stepId: s.stepId }) : onSelect(s.stepId, s.instance ?? null));
  return html`<section class="run chain" data-chain=${chain.chainId}>
    <p><a href="#/runs">← runs</a></p>
    <div class="titlebar"><h2>${wf ? html`<span data-testid="workflow-name">${wf.name}</span> <small>workflow ${chain.jobType} · chain ${chain.chainId}</small>`
      : html`${chain.jobType} <small>chain ${chain.chainId}</small>`}</h2><${ConnBadge} ...${conn} /></div>
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
    ${wf ? html`
    <${WorkflowDag} chain=${chain} selected=${wsel} onSelect=${onSelectJob} />
    ${wfJob ? html`<${JobDetail} n=${wfJob} instance=${wsel.instance} stepId=${wsel.stepId} onSelectStep=${(stepId) => setWsel({ ...wsel, stepId })}
        onDecided=${onDecided} onError=${setError} />`
      : html`<p class="hint">Click a job to see its steps, and a step to see its run's span tree.</p>`}
    ${wfStep ? html`<${StepDetail} key=${wfStep.stepId} step=${wfStep} spans=${wfStep.jobId ? spans.current.get(wfStep.jobId) : null}
        onDecided=${onDecided} onError=${setError} />` : null}`
    : html`
    <${ChainDag} chain=${chain} selected=${selKey} onSelect=${onSelect} onDecided=${onDecided} onError=${setError} />
    ${selStep ? html`<${StepDetail} key=${selKey} step=${selStep} spans=${selStep.jobId ? spans.current.get(selStep.jobId) : null}
        onDecided=${onDecided} onError=${setError} />`
      : html`<p class="hint">Click a step to see its run's span tree.</p>`}`}
    ${wfOutputs ? html`<h3>Workflow outputs</h3><pre class="output" data-testid="workflow-outputs">${JSON.stringify(wfOutputs, null, 2)}</pre>` : null}
    <h3>Steps</h3>
    <table class="steps-table" data-testid="steps-table"><thead><tr><th>step</th><th>skill</th><th>status</th><th>depends on</th><th>attempt</th><th>started</th><th>finished</th><th>cost</th></tr></thead>
      <tbody>${chain.steps.map((s) => html`<tr data-step=${stepKey(s)} onClick=${() => selectRow(s)}>
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
