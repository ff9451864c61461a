// How the dashboard names and orders runs. A job id is a UUIDv7: its first 12 hex digits are
// its creation time in milliseconds, so runs created together share them (100 rows once
// showed 2 distinct "first 8 digits"). Its last digits are random: they tell runs apart.
import { useState } from 'preact/hooks';
import { html } from './ui.js';

/** jobLabel is the short name of a run: the last 8 hex digits of its id, a substring of the
 * id, so the label can be searched for in logs and in `yard list`. */
export const jobLabel = (id) => '…' + String(id).slice(-8);

/** micros is an RFC 3339 time in microseconds since the epoch (Date keeps milliseconds only;
 * the API gives microseconds, and orders by them). */
export function micros(t) {
  const frac = (/\.(\d+)/.exec(t)?.[1] || '').padEnd(6, '0');
  return Date.parse(t) * 1000 + Number(frac.slice(3, 6));
}

/** newestFirst orders runs as the API lists them: creation time, then id, both descending. */
export function newestFirst(a, b) {
  const d = micros(b.timings.createdAt) - micros(a.timings.createdAt);
  if (d) return d;
  return a.jobId < b.jobId ? 1 : a.jobId > b.jobId ? -1 : 0;
}

/** mergeRuns returns list with items added or replacing the runs of the same id, newest first. */
export function mergeRuns(list, items) {
  const byId = new Map(list.map((r) => [r.jobId, r]));
  for (const r of items) byId.set(r.jobId, r);
  return [...byId.values()].sort(newestFirst);
}

async function copyText(text) {
  if (navigator.clipboard?.writeText) {
    try { await navigator.clipboard.writeText(text); return true; } catch { /* fall back below */ }
  }
  // Pages served over plain HTTP from a host other than localhost have no Clipboard API.
  const ta = document.createElement('textarea');
  ta.value = text;
  ta.setAttribute('readonly', '');
  ta.style.position = 'fixed';
  ta.style.opacity = '0';
  document.body.appendChild(ta);
  ta.select();
  let ok = false;
  try { ok = document.execCommand('copy'); } catch { ok = false; }
  ta.remove();
  return ok;
}

/** JobId is a run's label, linking to its page (the full id on hover), and a button that
 * copies the full id. */
export function JobId({ id }) {
  const [copied, setCopied] = useState(null);
  const copy = async () => {
    setCopied((await copyText(id)) ? 'copied' : 'copy failed');
    setTimeout(() => setCopied(null), 1500);
  };
  return html`<span class="jobid">
    <a href=${'#/runs/' + id} title=${id} data-testid="job-label">${jobLabel(id)}</a>
    <button type="button" class="copy" title=${'Copy the job id ' + id} aria-label="Copy the job id"
      data-testid="copy-id" onClick=${copy}>${copied || 'copy id'}</button>
  </span>`;
}
