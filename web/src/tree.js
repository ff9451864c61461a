// A run's span tree, drawn for its tier: a line for llm_only, an iteration tree for ReAct
// (tool_using), a DAG with fork/join counters for chains (laid out by dagre), and for
// autonomous runs the tier 4 view of agenttree.js above the folded full tree. Every llm_call
// node shows its billing. When a run was resumed, every node names the attempt that made
// it, and the spans a dead attempt left running show as abandoned.
import { Graph, layout } from '@dagrejs/dagre';
import { html, usd, ms } from './ui.js';
import { AgentRun } from './agenttree.js';

const byStart = (a, b) => new Date(a.startedAt) - new Date(b.startedAt) || (a.id < b.id ? -1 : 1);

/** buildTree returns the roots with children arrays, in start order. */
export function buildTree(spans) {
  const nodes = new Map(spans.map((s) => [s.id, { ...s, children: [] }]));
  const roots = [];
  for (const n of [...nodes.values()].sort(byStart)) {
    const p = n.parentId && nodes.get(n.parentId);
    (p ? p.children : roots).push(n);
  }
  return roots;
}

function Billing({ b }) {
  if (!b) return null;
  return html`<div class="billing" data-testid="billing">
    ${b.provider}/${b.model} · in ${b.tokensIn} · out ${b.tokensOut}${b.tokensCached ? ` · cached ${b.tokensCached}` : ''} · <strong>${usd(b.costUsd)}</strong>
  </div>`;
}

function counter(s) {
  const a = s.attributes || {};
  const done = a.arrived ?? a.completed ?? a.done;
  const total = a.expected ?? a.total ?? a.branches;
  return done != null || total != null ? `${done ?? '?'}/${total ?? '?'}` : null;
}

/** NodeCard is one span; attempts says the run had more than one, so each node names its own. */
export function NodeCard({ s, label, attempts }) {
  const c = s.type === 'chain_fork' || s.type === 'chain_join' ? counter(s) : null;
  const decision = s.attributes?.decision;
  return html`<div class=${`node t-${s.type} s-${s.status}`} data-span-type=${s.type} data-span-id=${s.id} data-status=${s.status}
      data-attempt=${s.attempt || 0}>
    <div class="node-head"><span class="ntype">${label || s.type}</span> <span class="nstatus">${s.status}</span>
      ${attempts && s.attempt ? html`<span class="nattempt" data-testid="attempt" title="the attempt of the run that made this span">attempt ${s.attempt}</span>` : null}
      ${s.durationMs != null ? html`<span class="ndur">${ms(s.durationMs)}</span>` : null}</div>
    <div class="nname">${s.name}${c ? html` <span class="counter" data-testid="counter">${c}</span>` : null}
      ${decision ? html` <span class="decision">${decision}${s.attributes.reason ? ': ' + s.attributes.reason : ''}</span>` : null}</div>
    <${Billing} b=${s.billing} />
  </div>`;
}

// An iteration's number is its step's (attribute iteration, or its name "iteration N"),
// never its position among the nodes drawn: a resumed run's iterations keep their numbers.
const iterationLabel = (n) => `iteration ${n.attributes?.iteration ?? n.name.replace(/^iteration /, '')}`;

/** Nested draws span nodes (with children arrays) as an indented tree. */
export function Nested({ nodes, depth = 0, attempts }) {
  if (!nodes.length) return null;
  return html`<ul class=${depth ? 'tree' : 'tree root'}>${nodes.map((n) => {
    const label = n.type === 'react_iteration' ? iterationLabel(n) : undefined;
    return html`<li key=${n.id}><${NodeCard} s=${n} label=${label} attempts=${attempts} /><${Nested} nodes=${n.children} depth=${depth + 1} attempts=${attempts} /></li>`;
  })}</ul>`;
}

function Line({ spans, attempts }) {
  return html`<div class="line" data-testid="line">${[...spans].sort(byStart).map((s, i) =>
    html`${i ? html`<span class="arrow">→</span>` : null}<${NodeCard} s=${s} key=${s.id} attempts=${attempts} />`)}</div>`;
}

const DAG_TYPES = new Set(['chain_step', 'chain_fork', 'chain_join']);
const W = 190;
const H = 58;

function Dag({ spans }) {
  const nodes = spans.filter((s) => DAG_TYPES.has(s.type));
  if (!nodes.length) return null;
  const g = new Graph();
  g.setGraph({ rankdir: 'LR', nodesep: 18, ranksep: 46, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  const byName = new Map(nodes.map((n) => [n.attributes?.step || n.name, n]));
  for (const n of nodes) g.setNode(n.id, { width: W, height: H });
  for (const n of nodes) {
    const deps = n.attributes?.depends_on || n.attributes?.after || [];
    let linked = false;
    for (const d of Array.isArray(deps) ? deps : [deps]) {
      const from = byName.get(d);
      if (from) { g.setEdge(from.id, n.id); linked = true; }
    }
    if (!linked && n.parentId && g.hasNode(n.parentId)) g.setEdge(n.parentId, n.id);
  }
  layout(g);
  const { width, height } = g.graph();
  return html`<svg class="dag" data-testid="dag" width=${width} height=${height} viewBox=${`0 0 ${width} ${height}`}>
    <defs><marker id="arr" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">
      <path d="M0,0 L10,5 L0,10 z" /></marker></defs>
    ${g.edges().map((e) => {
      const pts = g.edge(e).points;
      return html`<path class="edge" marker-end="url(#arr)" d=${'M' + pts.map((p) => `${p.x},${p.y}`).join(' L')} />`;
    })}
    ${nodes.map((n) => {
      const p = g.node(n.id);
      const c = counter(n);
      return html`<g class=${`dnode t-${n.type} s-${n.status}`} data-span-type=${n.type} transform=${`translate(${p.x - W / 2},${p.y - H / 2})`}>
        <rect width=${W} height=${H} rx="6" />
        <text x="8" y="18" class="dtype">${n.type.replace('chain_', '')}${c ? ` ${c}` : ''}</text>
        <text x="8" y="36">${String(n.attributes?.step || n.name).slice(0, 24)}</text>
        <text x="8" y="51" class="dstatus">${n.status}</text></g>`;
    })}
  </svg>`;
}

/** SpanTree draws the spans of one run (or chain) for its execution type; dag=false leaves
 * out a chain's span DAG where the page draws the chain's own (pages/chain.js). pending is
 * what an autonomous run paused for approval waits on, reviews the decisions on its pauses
 * (agenttree.js, AgentRun). */
export function SpanTree({ spans, executionType, dag = true, pending = null, reviews = [] }) {
  const roots = buildTree(spans);
  const tier = executionType || 'llm_only';
  // More than one attempt made spans: the run was resumed, and each node says whose it is.
  const attempts = new Set(spans.map((s) => s.attempt).filter(Boolean)).size > 1;
  return html`<div class=${'spantree tier-' + tier} data-testid="spantree" data-tier=${tier}>
    ${tier === 'llm_only' ? html`<${Line} spans=${spans} attempts=${attempts} />` : null}
    ${tier === 'chain' && dag ? html`<${Dag} spans=${spans} />` : null}
    ${tier === 'autonomous' ? html`<${AgentRun} spans=${spans} attempts=${attempts} pending=${pending} reviews=${reviews} />
      <details class="allspans"><summary>All spans (${spans.length})</summary><${Nested} nodes=${roots} attempts=${attempts} /></details>` : null}
    ${tier !== 'llm_only' && tier !== 'autonomous' ? html`<${Nested} nodes=${roots} attempts=${attempts} />` : null}
  </div>`;
}
