// The usage page (#/usage, role admin): cost and tokens over time by skill, model, provider
// and user, the top skills, and the month against the organisation's quota and budget —
// drawn from GET /api/v1/admin/usage. Charts are plain SVG (no chart library): a few stacked
// bars per day, each bar carrying its key and value as data attributes.
import { useEffect, useState } from 'preact/hooks';
import { api, query } from '../api.js';
import { html, ErrorBox, Loading, Empty, usd } from '../ui.js';
import './usage.css';

const DIMS = [['skill', 'Skill'], ['model', 'Model'], ['provider', 'Provider'], ['user', 'User']];
const PALETTE = ['#2e90fa', '#12b76a', '#f79009', '#7a5af8', '#ee46bc', '#06aed4', '#98a2b3'];
const SERIES = 6; // keys drawn on their own; the rest is "other"
const DAY = 86400000;

const isoDay = (d) => d.toISOString().slice(0, 10);

/** presets are the periods offered: [from, to) as YYYY-MM-DD (to exclusive). */
export function presets(now = new Date()) {
  const y = now.getUTCFullYear(), m = now.getUTCMonth();
  const today = new Date(Date.UTC(y, m, now.getUTCDate()));
  const tomorrow = new Date(today.getTime() + DAY);
  return {
    month: ['This month', isoDay(new Date(Date.UTC(y, m, 1))), isoDay(new Date(Date.UTC(y, m + 1, 1)))],
    last_month: ['Last month', isoDay(new Date(Date.UTC(y, m - 1, 1))), isoDay(new Date(Date.UTC(y, m, 1)))],
    d7: ['Last 7 days', isoDay(new Date(tomorrow.getTime() - 7 * DAY)), isoDay(tomorrow)],
    d30: ['Last 30 days', isoDay(new Date(tomorrow.getTime() - 30 * DAY)), isoDay(tomorrow)],
  };
}

const fmtTokens = (n) => (n >= 1e6 ? (n / 1e6).toFixed(2) + 'M' : n >= 1e4 ? (n / 1e3).toFixed(1) + 'k' : String(n));
const label = (k) => (k === '' ? '(none)' : k);
/** money shows dollars with three significant digits, however small. */
const money = (v) => (v === 0 ? '$0' : v >= 100 ? '$' + v.toFixed(0) : '$' + Number(v.toPrecision(3)));

/** days lists every UTC day of [from, to). */
function days(from, to) {
  const out = [];
  for (let t = Date.parse(from + 'T00:00:00Z'); t < Date.parse(to + 'T00:00:00Z') && out.length < 400; t += DAY) out.push(isoDay(new Date(t)));
  return out;
}

/** stack groups a daily series into the SERIES largest keys (by the metric) and "other". */
export function stack(points, metric) {
  const total = new Map();
  for (const p of points) total.set(p.key, (total.get(p.key) || 0) + p[metric]);
  const keys = [...total.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([k]) => k);
  const shown = keys.slice(0, keys.length > SERIES + 1 ? SERIES : SERIES + 1);
  const other = keys.length > shown.length;
  const byDay = new Map();
  for (const p of points) {
    const k = shown.includes(p.key) ? p.key : '\u0000other';
    const d = byDay.get(p.day) || new Map();
    d.set(k, (d.get(k) || 0) + p[metric]);
    byDay.set(p.day, d);
  }
  return { keys: other ? [...shown, '\u0000other'] : shown, byDay };
}

function StackedBars({ points, metric, from, to, dim }) {
  const { keys, byDay } = stack(points, metric);
  const ds = days(from, to);
  const max = Math.max(0, ...[...byDay.values()].map((d) => [...d.values()].reduce((a, b) => a + b, 0)));
  const W = 900, H = 220, left = 78, bottom = 22, top = 8;
  const bw = (W - left) / Math.max(ds.length, 1);
  const y = (v) => (max ? ((H - bottom - top) * v) / max : 0);
  const fmt = metric === 'costUsd' ? money : fmtTokens;
  const color = (k) => PALETTE[Math.min(keys.indexOf(k), PALETTE.length - 1)];
  const name = (k) => (k === '\u0000other' ? 'other' : label(k));
  return html`<div class="uchart" data-testid="usage-chart" data-dim=${dim} data-metric=${metric}>
    <svg viewBox=${`0 0 ${W} ${H}`} width="100%" role="img" aria-label=${`${metric === 'costUsd' ? 'cost' : 'tokens'} per day by ${dim}`}>
      ${[0, 0.5, 1].map((f) => html`<g>
        <line x1=${left} x2=${W} y1=${H - bottom - y(max * f)} y2=${H - bottom - y(max * f)} class="grid" />
        <text x=${left - 6} y=${H - bottom - y(max * f) + 4} text-anchor="end" class="axis">${fmt(max * f)}</text></g>`)}
      ${ds.map((d, i) => {
        const parts = byDay.get(d);
        let acc = 0;
        const bars = parts ? keys.filter((k) => parts.has(k)).map((k) => {
          const v = parts.get(k);
          const h = y(v);
          acc += h;
          return html`<rect x=${left + i * bw + bw * 0.12} width=${bw * 0.76} y=${H - bottom - acc} height=${Math.max(h, v > 0 ? 1 : 0)}
            fill=${color(k)} data-day=${d} data-key=${name(k)} data-value=${v}><title>${d} · ${name(k)}: ${fmt(v)}</title></rect>`;
        }) : null;
        const tick = ds.length <= 10 || i % Math.ceil(ds.length / 10) === 0;
        return html`<g>${bars}${tick ? html`<text x=${left + i * bw + bw / 2} y=${H - 6} text-anchor="middle" class="axis">${d.slice(5)}</text>` : null}</g>`;
      })}
    </svg>
    <ul class="legend">${keys.map((k) => html`<li data-key=${name(k)}><i style=${{ background: color(k) }}></i>${name(k)}</li>`)}</ul>
  </div>`;
}

function Meter({ label: what, used, limit, fmt, testid }) {
  if (limit == null) {
    return html`<div class="meter" data-testid=${testid}><b>${what}</b> ${fmt(used)} <small>(no limit set)</small></div>`;
  }
  const pct = limit > 0 ? Math.min(100, (100 * used) / limit) : 100;
  return html`<div class="meter" data-testid=${testid}><b>${what}</b> ${fmt(used)} of ${fmt(limit)} (${pct.toFixed(1)} %)
    <div class="progress"><div class=${'bar' + (pct >= 100 ? ' over' : pct >= 80 ? ' near' : '')} style=${{ width: pct + '%' }}></div></div></div>`;
}

function ShareTable({ rows, title, testid, total }) {
  if (!rows.length) return null;
  return html`<div class="ushare"><h3>${title}</h3><table data-testid=${testid}>
    <thead><tr><th></th><th>calls</th><th>tokens</th><th>cost</th><th>share</th></tr></thead>
    <tbody>${rows.map((r) => html`<tr data-key=${r.key}>
      <td>${label(r.key)}</td><td>${r.calls}${r.unknownCalls ? html` <small title="cut off at the provider: outcome unknown">(${r.unknownCalls} unknown)</small>` : null}</td>
      <td>${fmtTokens(r.tokens)}</td><td data-testid="cost" data-value=${r.costUsd}>${usd(r.costUsd)}</td>
      <td><div class="sharebar"><div style=${{ width: (total > 0 ? (100 * r.costUsd) / total : 0) + '%' }}></div></div></td></tr>`)}</tbody>
  </table></div>`;
}

/** Usage is the usage and cost page. */
export function Usage() {
  const ps = presets();
  const [preset, setPreset] = useState('month');
  const [from, setFrom] = useState(ps.month[1]);
  const [to, setTo] = useState(ps.month[2]);
  const [dim, setDim] = useState('skill');
  const [metric, setMetric] = useState('costUsd');
  const [pseudonymise, setPseudonymise] = useState(false);
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);

  const params = { from, to, pseudonymise: pseudonymise ? 'true' : '' };
  useEffect(() => {
    setError(null);
    api('GET', '/admin/usage' + query({ ...params, users: 10 })).then(setData, (err) => { setError(err); setData(null); });
  }, [from, to, pseudonymise]);

  const choose = (p) => {
    setPreset(p);
    if (ps[p]) { setFrom(ps[p][1]); setTo(ps[p][2]); }
  };
  const m = data?.thisMonth;
  return html`<section class="usage">
    <div class="titlebar"><h2>Usage and costs</h2>
      <a class="button" href=${'/api/v1/admin/usage' + query({ ...params, format: 'csv' })} download data-testid="csv">Download CSV</a></div>
    <div class="filters">
      <label>Period<select name="preset" value=${preset} onChange=${(e) => choose(e.target.value)}>
        ${Object.entries(ps).map(([k, v]) => html`<option value=${k}>${v[0]}</option>`)}<option value="custom">Custom</option></select></label>
      <label>From<input type="date" name="from" value=${from} onChange=${(e) => { setPreset('custom'); setFrom(e.target.value); }} /></label>
      <label>To (exclusive)<input type="date" name="to" value=${to} onChange=${(e) => { setPreset('custom'); setTo(e.target.value); }} /></label>
      <label>Show<select name="metric" value=${metric} onChange=${(e) => setMetric(e.target.value)}>
        <option value="costUsd">cost</option><option value="tokens">tokens</option></select></label>
      <label class="check"><span>Users</span><span><input type="checkbox" name="pseudonymise" checked=${pseudonymise}
        onChange=${(e) => setPseudonymise(e.target.checked)} /> pseudonymised</span></label>
    </div>
    <${ErrorBox} error=${error} />
    ${data === null && !error ? html`<${Loading} what="usage" />` : null}
    ${data ? html`
      <div class="facts" data-testid="usage-totals">
        <span>cost <b data-testid="total-cost" data-value=${data.costUsd}>${usd(data.costUsd)}</b></span>
        <span>tokens <b data-testid="total-tokens">${fmtTokens(data.tokens)}</b> (${fmtTokens(data.tokensIn)} in, ${fmtTokens(data.tokensOut)} out)</span>
        <span>calls <b data-testid="total-calls">${data.calls}</b></span>
        ${data.unknownCalls ? html`<span title="cut off at the provider: billed there perhaps, 0 here">${data.unknownCalls} calls with outcome unknown</span>` : null}
      </div>
      <div class="month" data-testid="this-month"><h3>This month (${m.month})</h3>
        <${Meter} label="Tokens" used=${m.tokens} limit=${m.monthlyTokenQuota} fmt=${fmtTokens} testid="quota" />
        <${Meter} label="Cost" used=${m.costUsd} limit=${m.monthlyBudgetUsd} fmt=${usd} testid="budget" />
      </div>
      ${data.calls === 0 ? html`<${Empty}>No LLM calls in this period.</${Empty}>` : html`
        <div class="titlebar"><h3>${metric === 'costUsd' ? 'Cost' : 'Tokens'} per day</h3>
          <div class="tabs">${DIMS.map(([k, v]) => html`<button class=${'link' + (dim === k ? ' active' : '')} data-dim=${k} onClick=${() => setDim(k)}>by ${v.toLowerCase()}</button>`)}</div></div>
        <${StackedBars} points=${data.daily[dim]} metric=${metric} from=${from} to=${to} dim=${dim} />
        <div class="ushares">
          <${ShareTable} rows=${data.bySkill.slice(0, 10)} title="Top skills" testid="top-skills" total=${data.costUsd} />
          <${ShareTable} rows=${data.byModel} title="Models" testid="by-model" total=${data.costUsd} />
          <${ShareTable} rows=${data.byProvider} title="Providers" testid="by-provider" total=${data.costUsd} />
          <${ShareTable} rows=${data.byUser} title=${`Users (top ${data.byUser.length} of ${data.usersTotal})`} testid="by-user" total=${data.costUsd} />
        </div>`}` : null}
  </section>`;
}
