// Small shared pieces: htm bound to Preact, error and state banners, formatting.
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);

export const TERMINAL = new Set(['completed', 'completed_max_iterations', 'completed_budget_exhausted',
  'failed', 'timed_out', 'cancelled', 'rejected', 'skipped']);

export const STATUSES = ['held_for_review', 'queued', 'running', 'pending_review', 'completed',
  'completed_max_iterations', 'completed_budget_exhausted', 'failed', 'timed_out', 'cancelled',
  'rejected', 'skipped'];

export function StatusBadge({ status }) {
  return html`<span class=${'badge st-' + status} data-status=${status}>${status}</span>`;
}

/** ErrorBox shows an ApiError with its code and what to do. */
export function ErrorBox({ error }) {
  if (!error) return null;
  return html`<div class="banner error" role="alert" data-testid="error">
    <strong>${error.code || 'ERROR'}</strong> ${error.message}
    ${error.troubleshooting?.length ? html`<ul>${error.troubleshooting.map((t) => html`<li>${t}</li>`)}</ul>` : null}
  </div>`;
}

export function Loading({ what }) {
  return html`<div class="state loading" data-testid="loading">Loading ${what}…</div>`;
}

export function Empty({ children }) {
  return html`<div class="state empty" data-testid="empty">${children}</div>`;
}

/** ConnBadge shows the stream's connection state. */
export function ConnBadge({ state, detail }) {
  const label = { connecting: 'connecting…', live: 'live', disconnected: 'disconnected — reconnecting', error: 'stream error' }[state] || state;
  return html`<span class=${'conn conn-' + state} data-testid="conn" data-state=${state} title=${detail || ''}>● ${label}${detail && state !== 'live' ? ': ' + detail : ''}</span>`;
}

export const usd = (v) => (v == null ? '—' : '$' + Number(v).toFixed(6));
export const ms = (v) => (v == null ? '' : v < 1000 ? `${v.toFixed(1)} ms` : `${(v / 1000).toFixed(2)} s`);
export const when = (t) => (t ? new Date(t).toLocaleString() : '—');
