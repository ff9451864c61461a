import { useEffect, useRef, useState } from 'preact/hooks';
import { api, query } from '../api.js';
import { openStream } from '../stream.js';
import { html, ErrorBox, Loading, Empty, StatusBadge, ConnBadge, STATUSES, usd, when, ms } from '../ui.js';
import { JobId, mergeRuns, newestFirst } from '../jobid.js';

/** PAGE is how many runs one request lists (the API's default; it allows up to 200). */
const PAGE = 50;

const REFRESHING = new Set(['job:span', 'job:llm_call', 'job:llm_response', 'job:tool_call', 'job:tool_result', 'job:progress', 'job:gpu_metrics']);

function matches(run, f) {
  if (f.status && run.status !== f.status) return false;
  if (f.job_type && run.jobType !== f.job_type) return false;
  if (f.queue && run.queue !== f.queue) return false;
  if (f.since && new Date(run.timings.createdAt) < new Date(f.since)) return false;
  return true;
}

function listQuery(f, cursor) {
  return query({
    status: f.status, job_type: f.job_type, queue: f.queue,
    since: f.since ? new Date(f.since).toISOString().replace(/\.\d{3}Z$/, 'Z') : '', limit: PAGE, cursor,
  });
}

/** Runs is the live dashboard: the organisation's runs, newest first, a page at a time
 * through the API's cursor ("Load older runs"), updated from the org stream. */
export function Runs({ me }) {
  const [filter, setFilter] = useState({ status: '', job_type: '', queue: '', since: '' });
  const [runs, setRuns] = useState(null);
  // cursor continues after the oldest run shown; null when the oldest run is shown.
  const [cursor, setCursor] = useState(null);
  const [older, setOlder] = useState(false); // a page of older runs is loading
  const [error, setError] = useState(null);
  const [conn, setConn] = useState({ state: 'connecting' });
  const filterRef = useRef(filter);
  filterRef.current = filter;
  const cursorRef = useRef(cursor);
  cursorRef.current = cursor;
  // generation counts filter changes, so an answer for an old filter is dropped.
  const generation = useRef(0);
  const canStream = me.roles.includes('viewer') || me.roles.includes('admin');

  // load lists the newest page. After a filter change it replaces the list; after a stream
  // reconnect (merge) it is merged in, so the older pages the operator loaded stay.
  const load = async (merge) => {
    setError(null);
    const gen = merge ? generation.current : ++generation.current;
    try {
      const res = await api('GET', '/dispatch' + listQuery(filterRef.current, ''));
      if (gen !== generation.current) return;
      if (merge) {
        setRuns((list) => mergeRuns(list || [], res.items || []));
      } else {
        setRuns(res.items || []);
        setCursor(res.nextCursor || null);
      }
    } catch (err) {
      if (gen !== generation.current) return;
      setError(err);
      setRuns((r) => r || []);
    }
  };
  useEffect(() => { load(false); }, [filter]);

  const loadOlder = async () => {
    const gen = generation.current;
    setOlder(true);
    setError(null);
    try {
      const res = await api('GET', '/dispatch' + listQuery(filterRef.current, cursor));
      if (gen !== generation.current) return;
      setRuns((list) => mergeRuns(list || [], res.items || []));
      setCursor(res.nextCursor || null);
    } catch (err) {
      if (gen === generation.current) setError(err);
    } finally {
      setOlder(false);
    }
  };

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
            // A run older than the oldest shown belongs to a page not loaded yet.
            const oldest = rest[rest.length - 1];
            if (cursorRef.current && rest.length === (list || []).length && oldest && newestFirst(r, oldest) > 0) return rest;
            return mergeRuns(rest, [r]);
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
      if (state === 'live' && reconnects++ > 0) load(true);
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
        <tbody>${runs.map((r) => html`<tr data-job=${r.jobId} data-chain=${r.chainId || undefined} class=${r.chainId && !r.chainStep ? 'chain-parent' : ''}>
          <td>${when(r.timings.createdAt)}</td>
          <td><${JobId} id=${r.jobId} /></td>
          <td>${r.jobType}${r.chainStep ? html` <a class="tag step" href=${'#/chains/' + r.chainId} data-testid="chain-step-tag"
            title="a step of a chain: open the chain">step ${r.chainStep}</a>` : null}</td>
          <td>${r.chainId && !r.chainStep ? html`<a class="tag chain" href=${'#/runs/' + r.jobId} data-testid="chain-tag"
            title="a chain's parent run: open its DAG">chain</a>` : r.executionType}</td><td>${r.queue}</td>
          <td><${StatusBadge} status=${r.status} /></td>
          <td>${ms(r.timings.durationMs)}</td><td>${usd(r.billing?.costUsd)}</td></tr>`)}</tbody></table>
        <div class="paging">
          <span data-testid="runs-count">${runs.length} run${runs.length === 1 ? '' : 's'} shown${cursor ? '' : ' — the oldest is shown'}</span>
          ${cursor ? html`<button type="button" data-testid="load-more" disabled=${older} onClick=${loadOlder}>
            ${older ? 'Loading…' : `Load older runs (${PAGE} more)`}</button>` : null}
        </div>`}
  </section>`;
}
