// Providers: the organisation's LLM providers (role admin) — endpoints and models, the API key
// (entered here, sealed for the router by the dispatcher and shown afterwards only as its last
// four characters), Test connection, the routing policy, RPM/TPM limits and prices
// (docs/api.md, "Administration").
import { useEffect, useState } from 'preact/hooks';
import { api, query } from '../api.js';
import { html, ErrorBox, Loading, Empty, when } from '../ui.js';

const KINDS = ['openai', 'openai_compatible', 'anthropic', 'gemini', 'openrouter'];
const HINTS = ['default', 'fast', 'reasoning', 'code', 'long_context', 'creative'];

function fieldList(err) {
  const fs = err?.context?.fields || [];
  return fs.length ? html`<ul class="field-error" data-testid="field-errors">${fs.map((f) => html`<li data-field=${f.field}>${f.field}: ${f.message}</li>`)}</ul>` : null;
}

function keyText(c) {
  if (!c) return 'no key';
  if (c.revokedAt) return 'revoked ' + when(c.revokedAt);
  return `…${c.last4} set ${when(c.setAt)} by ${c.setBy}`;
}

function ProviderCard({ p, onChanged }) {
  const [key, setKey] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const [test, setTest] = useState(null);
  const run = async (fn) => {
    setBusy(true); setError(null);
    try { await fn(); } catch (err) { setError(err); } finally { setBusy(false); }
  };
  const saveKey = (e) => { e.preventDefault(); run(async () => { await api('PUT', `/admin/providers/${encodeURIComponent(p.name)}/credential`, { apiKey: key }); setKey(''); onChanged(); }); };
  const revoke = () => run(async () => { await api('DELETE', `/admin/providers/${encodeURIComponent(p.name)}/credential`); onChanged(); });
  const probe = () => run(async () => { setTest(null); setTest(await api('POST', `/admin/providers/${encodeURIComponent(p.name)}/test`)); });
  return html`<article class="provider" data-provider=${p.name}>
    <header><b>${p.name}</b> <small>${p.kind} · ${p.jurisdiction} · ${p.enabled ? 'enabled' : 'disabled'}</small> <small>${p.baseUrl}</small></header>
    <p>models: ${Object.entries(p.models || {}).map(([r, m]) => `${r}=${m}`).join(', ') || 'none'}</p>
    <p data-testid="key">${keyText(p.credential)}</p>
    <form onSubmit=${saveKey} class="inline">
      <input type="password" name="apiKey" autocomplete="off" placeholder="API key" value=${key} onInput=${(e) => setKey(e.target.value)} />
      <button type="submit" disabled=${busy || !key} data-testid="set-key">${p.credential ? 'Rotate key' : 'Set key'}</button>
      ${p.credential && !p.credential.revokedAt ? html`<button type="button" class="danger" onClick=${revoke} disabled=${busy} data-testid="revoke-key">Revoke key</button>` : null}
      <button type="button" onClick=${probe} disabled=${busy} data-testid="test">${busy ? 'Testing…' : 'Test connection'}</button>
    </form>
    ${test ? html`<div class=${'banner ' + (test.ok ? 'info' : 'error')} data-testid="test-result" data-ok=${String(test.ok)}>
      ${test.ok ? `OK: ${test.model} answered “${test.answer}” in ${test.latencyMs} ms` : `Failed: ${test.error?.code}: ${test.error?.message}`}
      <a href=${'#/runs/' + test.jobId}> probe run</a></div>` : null}
    <${ErrorBox} error=${error} />${fieldList(error)}
  </article>`;
}

function NewProvider({ onChanged }) {
  const [f, setF] = useState({ name: '', kind: 'openai', baseUrl: '', jurisdiction: 'global', model: '' });
  const [error, setError] = useState(null);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const save = async (e) => {
    e.preventDefault(); setError(null);
    try {
      await api('PUT', '/admin/providers/' + encodeURIComponent(f.name), { kind: f.kind, baseUrl: f.baseUrl,
        jurisdiction: f.jurisdiction, models: f.model ? { default: f.model } : {} });
      setF({ ...f, name: '', model: '' });
      onChanged();
    } catch (err) { setError(err); }
  };
  return html`<form onSubmit=${save} class="inline" data-testid="new-provider" novalidate>
    <input name="name" placeholder="name" value=${f.name} onInput=${set('name')} />
    <select name="kind" value=${f.kind} onChange=${set('kind')}>${KINDS.map((k) => html`<option value=${k}>${k}</option>`)}</select>
    <input name="baseUrl" placeholder="base URL (openai_compatible)" value=${f.baseUrl} onInput=${set('baseUrl')} />
    <select name="jurisdiction" value=${f.jurisdiction} onChange=${set('jurisdiction')}>${['global', 'eu', 'us'].map((k) => html`<option value=${k}>${k}</option>`)}</select>
    <input name="model" placeholder="default model" value=${f.model} onInput=${set('model')} />
    <button type="submit" data-testid="add-provider">Save provider</button>
    <${ErrorBox} error=${error} />${fieldList(error)}
  </form>`;
}

// Routing is remounted with each reload of the page's data (its key), so the "Saved." it
// shows after a save is the page's (saved, onSaved), not its own: the reload that follows
// the save would otherwise take it away at once.
function Routing({ providers, policy, onChanged, saved, onSaved }) {
  const [rules, setRules] = useState(() => Object.fromEntries(HINTS.map((h) => [h, policy.find((r) => r.hint === h) || { hint: h, provider: '', model: '' }])));
  const [error, setError] = useState(null);
  const set = (h, k) => (e) => setRules({ ...rules, [h]: { ...rules[h], [k]: e.target.value } });
  const save = async (e) => {
    e.preventDefault(); setError(null); onSaved(false);
    try {
      await api('PUT', '/admin/routing', { rules: HINTS.map((h) => rules[h]).filter((r) => r.provider) });
      onSaved(true); onChanged();
    } catch (err) { setError(err); }
  };
  return html`<form onSubmit=${save} data-testid="routing">
    <table><thead><tr><th>hint</th><th>provider</th><th>model (optional)</th></tr></thead><tbody>
      ${HINTS.map((h) => html`<tr data-hint=${h}><td>${h}</td>
        <td><select name=${'provider-' + h} value=${rules[h].provider} onChange=${set(h, 'provider')}><option value="">—</option>
          ${providers.map((p) => html`<option value=${p.name}>${p.name}</option>`)}</select></td>
        <td><input name=${'model-' + h} value=${rules[h].model || ''} onInput=${set(h, 'model')} /></td></tr>`)}
    </tbody></table>
    <button type="submit" data-testid="save-routing">Save routing policy</button>
    ${saved ? html`<span class="banner info" data-testid="routing-saved">Saved.</span>` : null}
    <${ErrorBox} error=${error} />${fieldList(error)}
  </form>`;
}

function Limits({ limits, onChanged }) {
  const [f, setF] = useState({ provider: '', model: '', rpm: '0', tpm: '0' });
  const [error, setError] = useState(null);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const save = async (e) => {
    e.preventDefault(); setError(null);
    try { await api('PUT', '/admin/limits', { provider: f.provider, model: f.model, rpm: Number(f.rpm), tpm: Number(f.tpm) }); onChanged(); } catch (err) { setError(err); }
  };
  const del = (l) => api('DELETE', '/admin/limits' + query({ provider: l.provider, model: l.model })).then(onChanged, setError);
  return html`<div data-testid="limits">
    ${limits.length === 0 ? html`<${Empty}>No limits: calls are not held back.</${Empty}>` : html`<table><thead><tr><th>provider</th><th>model</th><th>RPM</th><th>TPM</th><th></th></tr></thead><tbody>
      ${limits.map((l) => html`<tr data-limit=${l.provider + '/' + l.model}><td>${l.provider}</td><td>${l.model}</td><td>${l.rpm}</td><td>${l.tpm}</td><td><button class="link" onClick=${() => del(l)}>remove</button></td></tr>`)}</tbody></table>`}
    <form onSubmit=${save} class="inline">
      <input name="provider" placeholder="provider" value=${f.provider} onInput=${set('provider')} />
      <input name="model" placeholder="model" value=${f.model} onInput=${set('model')} />
      <input name="rpm" type="number" min="0" value=${f.rpm} onInput=${set('rpm')} /> RPM
      <input name="tpm" type="number" min="0" value=${f.tpm} onInput=${set('tpm')} /> TPM
      <button type="submit" data-testid="save-limit">Set limit</button>
    </form><${ErrorBox} error=${error} />${fieldList(error)}
  </div>`;
}

function Prices({ prices, onChanged }) {
  const [f, setF] = useState({ providerKind: 'openai_compatible', model: '', input: '', output: '', cached: '0' });
  const [error, setError] = useState(null);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const save = async (e) => {
    e.preventDefault(); setError(null);
    try {
      await api('PUT', '/admin/prices', { providerKind: f.providerKind, model: f.model, inputPerMTok: Number(f.input),
        outputPerMTok: Number(f.output), cachedPerMTok: Number(f.cached) });
      onChanged();
    } catch (err) { setError(err); }
  };
  return html`<div data-testid="prices">
    <table><thead><tr><th>kind</th><th>model</th><th>input</th><th>output</th><th>cached</th><th>source</th></tr></thead><tbody>
      ${prices.map((p) => html`<tr data-price=${p.providerKind + '/' + p.model} data-source=${p.source}><td>${p.providerKind}</td><td>${p.model}</td>
        <td>${p.inputPerMTok}</td><td>${p.outputPerMTok}</td><td>${p.cachedPerMTok}</td><td>${p.source}</td></tr>`)}</tbody></table>
    <form onSubmit=${save} class="inline">
      <select name="providerKind" value=${f.providerKind} onChange=${set('providerKind')}>${KINDS.map((k) => html`<option value=${k}>${k}</option>`)}</select>
      <input name="model" placeholder="model" value=${f.model} onInput=${set('model')} />
      <input name="input" type="number" step="any" placeholder="input $/Mtok" value=${f.input} onInput=${set('input')} />
      <input name="output" type="number" step="any" placeholder="output $/Mtok" value=${f.output} onInput=${set('output')} />
      <input name="cached" type="number" step="any" placeholder="cached $/Mtok" value=${f.cached} onInput=${set('cached')} />
      <button type="submit" data-testid="save-price">Set price</button>
    </form><${ErrorBox} error=${error} />${fieldList(error)}
  </div>`;
}

/** Providers is the organisation's provider settings page (role admin). */
export function Providers({ me }) {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  const [gen, setGen] = useState(0);
  const [routingSaved, setRoutingSaved] = useState(false);
  const load = () => Promise.all([api('GET', '/admin/providers'), api('GET', '/admin/routing'), api('GET', '/admin/limits'), api('GET', '/admin/prices')])
    .then(([p, r, l, pr]) => { setData({ providers: p.items || [], policy: r.rules || [], limits: l.items || [], prices: pr.items || [] }); setGen((g) => g + 1); setError(null); },
      (err) => setError(err));
  useEffect(() => { load(); }, []);
  if (!me.roles.includes('admin')) return html`<section><h2>Providers</h2><p>Provider settings need the admin role.</p></section>`;
  if (!data) return error ? html`<section><${ErrorBox} error=${error} /></section>` : html`<${Loading} what="providers" />`;
  return html`<section class="providers">
    <div class="titlebar"><h2>Providers</h2><button class="link" onClick=${load}>Refresh</button></div>
    <${ErrorBox} error=${error} />
    ${data.providers.length === 0 ? html`<${Empty}>No provider yet.</${Empty}>` : data.providers.map((p) => html`<${ProviderCard} p=${p} onChanged=${load} key=${p.name} />`)}
    <h3>Add or change a provider</h3><${NewProvider} onChanged=${load} />
    <h3>Routing policy</h3><${Routing} providers=${data.providers} policy=${data.policy} onChanged=${load} key=${'r' + gen}
      saved=${routingSaved} onSaved=${setRoutingSaved} />
    <h3>Limits (per provider and model)</h3><${Limits} limits=${data.limits} onChanged=${load} />
    <h3>Prices (USD per million tokens)</h3><${Prices} prices=${data.prices} onChanged=${load} />
  </section>`;
}
