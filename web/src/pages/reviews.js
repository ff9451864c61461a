import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.js';
import { useReview } from '../review.js';
import { html, ErrorBox, Loading, Empty, StatusBadge, usd, when } from '../ui.js';

function reasonText(r) {
  if (typeof r === 'string') return r;
  const parts = [r.reason || r.code || r.detector, r.detector && r.reason ? `(${r.detector})` : null, r.path ? `at ${r.path}` : null];
  return parts.filter(Boolean).join(' ') || JSON.stringify(r);
}

function ReviewCard({ item, onDone }) {
  const { reason, setReason, busy, error, send: decide } = useReview(item.jobId, (what) => onDone(item.jobId, what));
  return html`<article class="review" data-job=${item.jobId}>
    <header><a href=${'#/runs/' + item.jobId}>${item.jobType}</a> <small>${item.jobId}</small> <${StatusBadge} status=${item.status} />
      <span>risk <b>${item.riskLevel || '—'}</b></span> <span>created ${when(item.timings?.createdAt)}</span></header>
    <div class="cols">
      <div><h4>Why it is held</h4><ul class="reasons">${(item.holdReasons || []).map((r) => html`<li>${reasonText(r)}</li>`)}</ul>
        <h4>Requested tools</h4><p>${item.tools?.length ? item.tools.join(', ') : 'none'}</p>
        <h4>Budget</h4><p>cost ceiling ${usd(item.costCeilingUsd)}</p>
        ${item.pending ? html`<h4>Waiting step</h4><pre>${JSON.stringify(item.pending, null, 2)}</pre>` : null}</div>
      <div><h4>Payload (detected PII masked)</h4><pre class="payload" data-testid="payload">${JSON.stringify(item.payload, null, 2)}</pre></div>
    </div>
    <div class="decide">
      <input name="reason" placeholder="Reason (required to reject)" value=${reason} onInput=${(e) => setReason(e.target.value)} />
      <button onClick=${() => decide('approve')} disabled=${busy} data-testid="approve">Approve</button>
      <button class="danger" onClick=${() => decide('reject')} disabled=${busy} data-testid="reject">Reject</button>
    </div>
    <${ErrorBox} error=${error} />
  </article>`;
}

/** Reviews is the queue of held and pending-review jobs. */
export function Reviews() {
  const [items, setItems] = useState(null);
  const [error, setError] = useState(null);
  const [done, setDone] = useState([]);
  const load = () => api('GET', '/reviews').then((r) => { setItems(r.items || []); setError(null); },
    (err) => { setError(err); setItems([]); });
  useEffect(() => { load(); }, []);
  const onDone = (id, what) => {
    setDone((d) => [...d, { id, what }]);
    setItems((list) => list.filter((x) => x.jobId !== id));
  };
  return html`<section>
    <div class="titlebar"><h2>Review queue</h2><button class="link" onClick=${load}>Refresh</button></div>
    ${done.map((d) => html`<div class="banner info" data-testid="decided">${d.what === 'approve' ? 'Approved' : 'Rejected'}
      <a href=${'#/runs/' + d.id}>${d.id.slice(0, 8)}</a>: follow it on its page.</div>`)}
    <${ErrorBox} error=${error} />
    ${items === null ? html`<${Loading} what="reviews" />` : items.length === 0 ? html`<${Empty}>Nothing waits for review.</${Empty}>`
      : items.map((it) => html`<${ReviewCard} item=${it} onDone=${onDone} key=${it.jobId} />`)}
  </section>`;
}
