import { useEffect, useState } from 'preact/hooks';
import { api, query } from '../api.js';
import { html, ErrorBox, Loading, Empty, when } from '../ui.js';

/** Skills lists the organisation's bindings with search. */
export function Skills({ me }) {
  const [q, setQ] = useState('');
  const [items, setItems] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    const t = setTimeout(() => {
      api('GET', '/skills' + query({ q })).then((r) => { setItems(r.items || []); setError(null); },
        (err) => { setError(err); setItems([]); });
    }, 150);
    return () => clearTimeout(t);
  }, [q]);
  const admin = me.roles.includes('skills_admin') || me.roles.includes('admin');
  return html`<section>
    <div class="titlebar"><h2>Skill bindings</h2>${admin ? html`<a class="button" href="#/skills/+new">New binding</a>` : null}</div>
    <input class="search" type="search" name="q" placeholder="Search job type or description" value=${q} onInput=${(e) => setQ(e.target.value)} />
    <${ErrorBox} error=${error} />
    ${items === null ? html`<${Loading} what="skills" />` : items.length === 0 ? html`<${Empty}>No binding matches.</${Empty}>`
      : html`<table data-testid="skills"><thead><tr><th>job type</th><th>tier</th><th>routing</th><th>model</th><th>queue</th><th>risk</th><th>enabled</th><th>version</th><th>updated</th></tr></thead>
      <tbody>${items.map((s) => html`<tr data-skill=${s.job_type}>
        <td><a href=${'#/skills/' + encodeURIComponent(s.job_type)}>${s.job_type}</a></td><td>${s.execution_type}</td>
        <td>${s.routing_hint}</td><td>${s.model_override || '—'}</td><td>${s.queue || 'default'}</td><td>${s.risk_level}</td>
        <td>${s.enabled ? 'yes' : 'no'}</td><td>${s.version}</td><td>${when(s.updated_at)} ${s.updated_by || ''}</td></tr>`)}</tbody></table>`}
  </section>`;
}

const blank = {
  job_type: '', enabled: true, description: '', execution_type: 'llm_only', routing_hint: 'default', model_override: '',
  system_prompt: '', tools: [], max_iterations: 0, max_tokens: 0, temperature: null, timeout_seconds: null,
  max_retries: null, queue: 'default', risk_level: 'minimal', requires_approval: false, data_residency: 'any',
  cost_ceiling_usd: null, chain: null, autonomous: null,
};

// The form keeps text for every input and converts on save, so a half-typed number or JSON
// is the server's to judge and its error appears beside the field.
function toForm(s) {
  const f = { ...blank, ...s };
  return {
    ...f,
    tools: (f.tools || []).join(', '),
    max_iterations: f.max_iterations || '', max_tokens: f.max_tokens || '',
    temperature: f.temperature ?? '', timeout_seconds: f.timeout_seconds ?? '', max_retries: f.max_retries ?? '',
    cost_ceiling_usd: f.cost_ceiling_usd ?? '',
    chain: f.chain ? JSON.stringify(f.chain, null, 2) : '', autonomous: f.autonomous ? JSON.stringify(f.autonomous, null, 2) : '',
  };
}

function fromForm(f) {
  const num = (v) => (v === '' || v == null ? undefined : Number(v));
  const json = (name, v) => {
    if (!v || !v.trim()) return undefined;
    try { return JSON.parse(v); } catch { throw Object.assign(new Error('invalid JSON'), { field: name }); }
  };
  return {
    job_type: f.job_type.trim(), enabled: f.enabled, description: f.description, execution_type: f.execution_type,
    routing_hint: f.routing_hint, model_override: f.model_override.trim(), system_prompt: f.system_prompt,
    tools: f.tools.split(',').map((t) => t.trim()).filter(Boolean),
    max_iterations: num(f.max_iterations) ?? 0, max_tokens: num(f.max_tokens) ?? 0, temperature: num(f.temperature),
    timeout_seconds: num(f.timeout_seconds), max_retries: num(f.max_retries), queue: f.queue.trim(),
    risk_level: f.risk_level, requires_approval: f.requires_approval, data_residency: f.data_residency,
    cost_ceiling_usd: num(f.cost_ceiling_usd), chain: json('chain', f.chain), autonomous: json('autonomous', f.autonomous),
  };
}

const SELECTS = {
  execution_type: ['llm_only', 'tool_using', 'chain', 'autonomous'],
  routing_hint: ['default', 'fast', 'reasoning', 'code', 'long_context', 'creative'],
  risk_level: ['minimal', 'limited', 'high', 'critical'],
  data_residency: ['any', 'eu_only', 'us_only'],
};

/** SkillEdit edits every field of a binding, shows the server's errors beside each field and
 * the binding's history. */
export function SkillEdit({ jobType, me }) {
  const isNew = jobType === '+new';
  const [form, setForm] = useState(isNew ? toForm(blank) : null);
  const [saved, setSaved] = useState(null);
  const [history, setHistory] = useState(null);
  const [error, setError] = useState(null);
  const [fieldErrors, setFieldErrors] = useState({});
  const [busy, setBusy] = useState(false);
  const admin = me.roles.includes('skills_admin') || me.roles.includes('admin');

  const load = async () => {
    if (isNew) return;
    try {
      const s = await api('GET', '/skills/' + encodeURIComponent(jobType));
      setSaved(s);
      setForm(toForm(s));
      const h = await api('GET', `/skills/${encodeURIComponent(jobType)}/history`);
      setHistory(h.items || []);
    } catch (err) { setError(err); }
  };
  useEffect(() => { load(); }, [jobType]);

  const save = async (e) => {
    e.preventDefault();
    setError(null);
    setFieldErrors({});
    let body;
    try { body = fromForm(form); } catch (err) {
      setFieldErrors({ [err.field]: ['is not valid JSON'] });
      return;
    }
    setBusy(true);
    try {
      const s = await api('PUT', '/skills/' + encodeURIComponent(body.job_type), body);
      setSaved(s);
      if (isNew) { location.hash = '#/skills/' + encodeURIComponent(s.job_type); return; }
      setForm(toForm(s));
      const h = await api('GET', `/skills/${encodeURIComponent(jobType)}/history`);
      setHistory(h.items || []);
    } catch (err) {
      setError(err);
      setFieldErrors(err.fields ? err.fields() : {});
    } finally { setBusy(false); }
  };

  if (!form) return error ? html`<section><p><a href="#/skills">← bindings</a></p><${ErrorBox} error=${error} /></section>` : html`<${Loading} what="binding" />`;
  const set = (k, kind) => (e) => setForm({ ...form, [k]: kind === 'bool' ? e.target.checked : e.target.value });
  const row = (k, label, input, hint) => html`<div class=${'field' + (fieldErrors[k] ? ' invalid' : '')} data-field=${k}>
    <label for=${'f-' + k}>${label}</label>${input}
    ${hint ? html`<small>${hint}</small>` : null}
    ${fieldErrors[k] ? html`<div class="field-error" data-testid=${'error-' + k}>${fieldErrors[k].join('; ')}</div>` : null}</div>`;
  const text = (k, label, hint, type = 'text') => row(k, label,
    html`<input id=${'f-' + k} name=${k} type=${type} step="any" value=${form[k]} onInput=${set(k)} disabled=${!admin} readOnly=${k === 'job_type' && !isNew} />`, hint);
  const select = (k, label) => row(k, label,
    html`<select id=${'f-' + k} name=${k} value=${form[k]} onChange=${set(k)} disabled=${!admin}>${SELECTS[k].map((o) => html`<option value=${o}>${o}</option>`)}</select>`);
  const check = (k, label) => row(k, label,
    html`<input id=${'f-' + k} name=${k} type="checkbox" checked=${form[k]} onChange=${set(k, 'bool')} disabled=${!admin} />`);
  const area = (k, label, hint) => row(k, label,
    html`<textarea id=${'f-' + k} name=${k} rows="5" value=${form[k]} onInput=${set(k)} disabled=${!admin} />`, hint);
  const unplaced = Object.keys(fieldErrors).filter((k) => !(k in blank));

  return html`<section class="skill-edit">
    <p><a href="#/skills">← bindings</a></p>
    <h2>${isNew ? 'New binding' : jobType} ${saved ? html`<small data-testid="version">version ${saved.version}</small>` : null}</h2>
    <${ErrorBox} error=${error} />
    ${unplaced.length ? html`<ul class="field-error">${unplaced.map((k) => html`<li>${k}: ${fieldErrors[k].join('; ')}</li>`)}</ul>` : null}
    <form onSubmit=${save} class="grid" novalidate>
      ${text('job_type', 'Job type')}${check('enabled', 'Enabled')}
      ${text('description', 'Description')}
      ${select('execution_type', 'Execution type')}${select('routing_hint', 'Routing hint')}
      ${text('model_override', 'Model override', 'empty: the routing policy picks')}
      ${area('system_prompt', 'System prompt')}
      ${text('tools', 'Tools', 'comma-separated tool names')}
      ${text('max_iterations', 'Max iterations', '', 'number')}${text('max_tokens', 'Max tokens', '', 'number')}
      ${text('temperature', 'Temperature', '0 to 2', 'number')}${text('timeout_seconds', 'Timeout (s)', '', 'number')}
      ${text('max_retries', 'Max retries', '', 'number')}${text('queue', 'Queue', 'a registered queue')}
      ${select('risk_level', 'Risk level')}${check('requires_approval', 'Requires approval')}
      ${select('data_residency', 'Data residency')}${text('cost_ceiling_usd', 'Cost ceiling (USD)', '', 'number')}
      ${area('chain', 'Chain definition (JSON)', 'for execution type chain')}
      ${area('autonomous', 'Autonomous settings (JSON)', 'for execution type autonomous')}
      ${admin ? html`<div class="actions"><button type="submit" disabled=${busy} data-testid="save">${busy ? 'Saving…' : 'Save binding'}</button></div>`
        : html`<p>Editing needs the skills_admin role.</p>`}
    </form>
    ${isNew ? null : html`<h3>History</h3>${history === null ? html`<${Loading} what="history" />` : history.length === 0 ? html`<${Empty}>No changes recorded.</${Empty}>`
      : html`<table data-testid="history"><thead><tr><th>version</th><th>action</th><th>who</th><th>when</th></tr></thead>
        <tbody>${history.map((h) => html`<tr><td>${h.version}</td><td>${h.action}</td><td>${h.changed_by}</td><td>${when(h.changed_at)}</td></tr>`)}</tbody></table>`}`}
  </section>`;
}
