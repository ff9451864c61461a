import { useEffect, useRef, useState } from 'preact/hooks';
import { api, query } from '../api.js';
import { openStream } from '../stream.js';
import { html, ErrorBox, Loading, Empty, StatusBadge, ConnBadge, STATUSES, usd, when, ms } from '../ui.js';

const REFRESHING = new Set(['job:span', 'job:llm_call', 'job:llm_response', 'job:tool_call', 'job:tool_result', 'job:progress', 'job:gpu_metrics']);

function matches(run, f) {
  if (f.status && run.status !== f.status) return false;
  if (f.job_type && run.jobType !== f.job_type) return false;
  if (f.queue && run.queue !== f.queue) return false;
  if (f.since && new Date(run.timings.createdAt) < new Date(f.since)) return false;
  return true;
}

/** Runs is the live dashboard: the organisation's runs, updated from the org stream. */
export function Runs({ me }) {
  const [filter, setFilter] = useState({ status: '', job_type: '', queue: '', since: '' });
  const [runs, setRuns] = useState(null);
  const [error, setError] = useState(null);
  const [conn, setConn] = useState({ state: 'connecting' });
  const filterRef = useRef(filter);
  filterRef.current = filter;
  const canStream = me.roles.includes('viewer') || me.roles.includes('admin');

  const load = async () => {
    setError(null);
    const f = filterRef.current;
    try {
      const res = await api('GET', '/dispatch' + query({
        status: f.status, job_type: f.job_type, queue: f.queue,
        since: f.since ? new Date(f.since).toISOString().replace(/\.\d{3}Z$/, 'Z') : '', limit: 100,
      }));
      setRuns(res.items || []);
    } catch (err) {
      setError(err);
      setRuns((r) => r || []);
    }
  };
  useEffect(() => { load(); }, [filter]);

  // Live: each event of a run refetches that run (coalesced), so the row shows its status.
  useEffect(() => {
    if (!canStream) return undefined;
    const pending = new Map();
    const refresh = (id) => {
      if (pending.has(id)) return;
      pending.set(id, setTimeout(async () => {
        pending.delete(id);
        try {
          const r = await api('GET', '/dispatch/' + id);
          setRuns((list) => {
            const rest = (list || []).filter((x) => x.jobId !== r.jobId);
            if (!matches(r, filterRef.current)) return rest;
            return [r, ...rest].sort((a, b) => new Date(b.timings.createdAt) - new Date(a.timings.createdAt));
          });
        } catch { /* the next event retries */ }
      }, 150));
    };
    let reconnects = 0;
    const s = openStream({ scope: 'org' }, (env) => {
      if (!REFRESHING.has(env.type) || !document.querySelector(`[data-job="${env.job_id}"]`)) refresh(env.job_id);
    }, (state, detail) => {
      setConn({ state, detail });
      // Org streams are live only: after a reconnect, the list catches up from the API.
      if (state === 'live' && reconnects++ > 0) load();
    });
    return () => { s.close(); pending.forEach(clearTimeout); };
  }, [canStream]);

  const set = (k) => (e) => setFilter({ ...filter, [k]: e.target.value });
  return html`<section>
    <div class="titlebar"><h2>Runs</h2>
      ${canStream ? html`<${ConnBadge} ...${conn} />` : html`<span class="conn">live updates need the viewer role</span>`}</div>
    <form class="filters" onSubmit=${(e) => e.preventDefault()}>
      <label>Status <select name="status" value=${filter.status} onChange=${set('status')}>
        <option value="">any</option>${STATUSES.map((s) => html`<option value=${s}>${s}</option>`)}</select></label>
      <label>Skill <input name="job_type" placeholder="job type" value=${filter.job_type} onChange=${set('job_type')} /></label>
      <label>Queue <input name="queue" placeholder="queue" value=${filter.queue} onChange=${set('queue')} /></label>
      <label>Since <input name="since" type="datetime-local" value=${filter.since} onChange=${set('since')} /></label>
    </form>
    <${ErrorBox} error=${error} />
    ${runs === null ? html`<${Loading} what="runs" />` : runs.length === 0
      ? html`<${Empty}>No runs match. Dispatch a job (POST /api/v1/dispatch) and it appears here live.</${Empty}>`
      : html`<table class="runs" data-testid="runs">
        <thead><tr><th>created</th><th>job</th><th>skill</th><th>type</th><th>queue</th><th>status</th><th>duration</th><th>cost</th></tr></thead>
        <tbody>${runs.map((r) => html`<tr data-job=${r.jobId}>
          <td>${when(r.timings.createdAt)}</td>
          <td><a href=${'#/runs/' + r.jobId}>${r.jobId.slice(0, 8)}</a></td>
          <td>${r.jobType}</td><td>${r.executionType}</td><td>${r.queue}</td>
          <td><${StatusBadge} status=${r.status} /></td>
          <td>${ms(r.timings.durationMs)}</td><td>${usd(r.billing?.costUsd)}</td></tr>`)}</tbody></table>`}
  </section>`;
}
