// The layout of a chain's DAG (GET /api/v1/chains/{id}): one node per step — a for_each
// step's instances grouped in one node — in layers by topological depth (a step is one
// layer right of its deepest parent), edges from dependsOn. Pure functions of the chain's
// steps, so they are tested without a browser (tests/dag.test.mjs).
//
// Written here rather than taken from a graph library: a chain is at most 256 steps, its
// layers are what a reader expects (roots left, each step right of all its parents), and
// nodes must be HTML (buttons on held steps), which dagre's positions alone do not give.

export const TERMINAL_STEP = new Set(['completed', 'failed', 'rejected', 'timed_out', 'cancelled', 'skipped']);
const FAILED = new Set(['failed', 'rejected', 'timed_out']);

/** Sizes of the drawing, in CSS pixels. */
export const SIZE = { w: 210, h: 104, gapX: 64, gapY: 18, pad: 12, chip: 34, chipH: 22, chipGap: 4, chipsPerRow: 5, groupHead: 92 };
/** MAX_CHIPS is how many instances a group draws; the steps table lists all of them. */
export const MAX_CHIPS = 60;

/**
 * groupSteps turns the API's step list (one entry per step, or per instance of a for_each
 * step) into one entry per step id, in the order the API lists them:
 * {id, jobType, dependsOn, status, costUsd, steps: [...entries], instances: [...entries with an instance]}.
 */
export function groupSteps(steps) {
  const byId = new Map();
  for (const s of steps || []) {
    let g = byId.get(s.stepId);
    if (!g) {
      g = { id: s.stepId, jobType: s.jobType, dependsOn: [...new Set(s.dependsOn || [])], steps: [], instances: [] };
      byId.set(s.stepId, g);
    }
    g.steps.push(s);
    if (s.instance != null) g.instances.push(s);
  }
  for (const g of byId.values()) {
    g.instances.sort((a, b) => a.instance - b.instance);
    // A fanned-out step may be listed as a whole (no instance; instances says how many)
    // beside its instances; the whole's cost, once ended, is theirs added up.
    g.whole = g.steps.find((s) => s.instance == null);
    g.forEach = g.instances.length > 0 || g.whole?.instances != null;
    g.count = g.instances.length || g.whole?.instances;
    g.status = groupStatus(g);
    g.costUsd = (g.instances.length ? g.instances : g.steps).reduce((sum, s) => sum + (s.costUsd || 0), 0);
    g.dependsOn = g.dependsOn.filter((d) => byId.has(d) && d !== g.id);
  }
  return [...byId.values()];
}

/** groupStatus is a step's status, or for a fanned-out step the status its instances add up
 * to (until the step as a whole has ended: then its own). */
export function groupStatus(g) {
  if (g.whole && (!g.instances.length || TERMINAL_STEP.has(g.whole.status))) return g.whole.status;
  const list = g.instances.length ? g.instances : g.steps;
  if (list.length === 1) return list[0].status;
  const st = list.map((s) => s.status);
  const any = (...names) => st.some((x) => names.includes(x));
  if (any('held_for_review', 'pending_review')) return st.includes('held_for_review') ? 'held_for_review' : 'pending_review';
  if (any('running')) return 'running';
  if (any('queued')) return 'queued';
  if (!st.every((x) => TERMINAL_STEP.has(x))) return 'pending';
  if (st.some((x) => FAILED.has(x))) return 'failed';
  if (any('cancelled')) return 'cancelled';
  if (st.every((x) => x === 'skipped')) return 'skipped';
  return 'completed';
}

/** depths maps each step id to its layer: 0 for roots, else one more than its deepest parent. */
export function depths(groups) {
  const byId = new Map(groups.map((g) => [g.id, g]));
  const depth = new Map();
  const visiting = new Set();
  const visit = (g) => {
    if (depth.has(g.id)) return depth.get(g.id);
    if (visiting.has(g.id)) return 0; // a cycle: the API never sends one; do not loop on it
    visiting.add(g.id);
    let d = 0;
    for (const p of g.dependsOn) d = Math.max(d, visit(byId.get(p)) + 1);
    visiting.delete(g.id);
    depth.set(g.id, d);
    return d;
  };
  groups.forEach(visit);
  return depth;
}

function nodeHeight(g) {
  if (!g.instances.length) return SIZE.h; // a for_each step's instances, or a matrix job's
  const rows = Math.ceil(Math.min(g.instances.length, MAX_CHIPS) / SIZE.chipsPerRow);
  return Math.max(SIZE.h, SIZE.groupHead + rows * (SIZE.chipH + SIZE.chipGap) + 20);
}

/**
 * layoutChain places the grouped steps (layoutGroups): {nodes: [{...group, layer, x, y, w, h, children}],
 * edges: [{from, to, d}], width, height}. Within a layer, nodes are ordered by the mean
 * height of their parents (one barycentre pass), which keeps most edges uncrossed; each
 * layer is centred vertically.
 */
export function layoutChain(steps) {
  return layoutGroups(groupSteps(steps));
}

/** layoutGroups places nodes that each have an id and dependsOn (steps, or a workflow's jobs). */
export function layoutGroups(groups) {
  const depth = depths(groups);
  const layers = [];
  for (const g of groups) (layers[depth.get(g.id)] ||= []).push(g);
  const children = new Map(groups.map((g) => [g.id, []]));
  for (const g of groups) for (const p of g.dependsOn) children.get(p).push(g.id);

  const placed = new Map();
  const columns = [];
  for (let l = 0; l < layers.length; l++) {
    const layer = (layers[l] || []).map((g, i) => {
      const ys = g.dependsOn.map((p) => placed.get(p)).filter(Boolean).map((n) => n.y + n.h / 2);
      return { g, i, key: ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : i };
    });
    layer.sort((a, b) => a.key - b.key || a.i - b.i);
    let y = 0;
    const col = layer.map(({ g }) => {
      const n = { ...g, layer: l, x: SIZE.pad + l * (SIZE.w + SIZE.gapX), y, w: SIZE.w, h: nodeHeight(g), children: children.get(g.id) };
      y += n.h + SIZE.gapY;
      placed.set(g.id, n);
      return n;
    });
    columns.push({ col, height: Math.max(0, y - SIZE.gapY) });
  }
  const inner = Math.max(0, ...columns.map((c) => c.height));
  for (const { col, height } of columns) for (const n of col) n.y += SIZE.pad + (inner - height) / 2;

  const nodes = columns.flatMap((c) => c.col);
  const edges = [];
  for (const n of nodes) {
    for (const p of n.dependsOn) {
      const a = placed.get(p);
      const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = n.x, y2 = n.y + n.h / 2;
      const dx = Math.max(24, (x2 - x1) / 2);
      edges.push({ from: p, to: n.id, status: a.status, d: `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}` });
    }
  }
  return {
    nodes, edges,
    width: SIZE.pad * 2 + Math.max(0, columns.length * (SIZE.w + SIZE.gapX) - SIZE.gapX),
    height: SIZE.pad * 2 + inner,
  };
}

/**
 * counters says how far a node's fan-in and fan-out are: join "2/3 done" (parents ended),
 * instances "4/5 done" (a for_each step's instances ended), matrix "2/3 instances done" (a
 * matrix job's instances whose steps have all ended), fork "1/3 started" (children
 * dispatched). byId maps step ids to nodes (for the parents' and children's statuses).
 */
export function counters(n, byId) {
  const out = [];
  const ended = (s) => TERMINAL_STEP.has(s);
  if (n.dependsOn.length > 1) {
    const done = n.dependsOn.filter((p) => ended(byId.get(p)?.status)).length;
    out.push({ kind: 'join', text: `${done}/${n.dependsOn.length} done` });
  }
  if (n.matrix) {
    const done = n.instances.filter((i) => i.done).length;
    out.push({ kind: 'matrix', text: `${done}/${n.count} instances done` });
  } else if (n.instances.length) {
    const done = n.instances.filter((s) => ended(s.status)).length;
    out.push({ kind: 'instances', text: `${done}/${n.instances.length} done` });
  }
  if (n.children.length > 1) {
    const started = n.children.filter((c) => byId.get(c)?.status !== 'pending').length;
    out.push({ kind: 'fork', text: `${started}/${n.children.length} started` });
  }
  return out;
}

// A workflow run (a chain with `workflow`) is drawn as its DAG of jobs: one node per job,
// edges from `needs`, a matrix job's instances grouped in its node. A job's status is its
// result once it has one, else what its steps add up to.

/** RESULT_STATUS maps a job's result to the step status its node is drawn with. */
export const RESULT_STATUS = { success: 'completed', failure: 'failed', cancelled: 'cancelled', skipped: 'skipped' };

/**
 * liveStatus is what a job's (or one matrix instance's) steps add up to while it runs: held
 * or running or queued if one is; pending while none has started; the ended status (as
 * groupStatus) once all have ended; otherwise running (between two steps, or instances
 * waiting for max-parallel).
 */
export function liveStatus(steps) {
  const st = (steps || []).map((s) => s.status);
  if (!st.length) return 'pending';
  if (st.every((x) => TERMINAL_STEP.has(x))) return groupStatus({ steps, instances: [] });
  if (st.includes('held_for_review')) return 'held_for_review';
  if (st.includes('pending_review')) return 'pending_review';
  if (st.some((x) => x !== 'pending' && x !== 'queued' && !TERMINAL_STEP.has(x))) return 'running';
  if (st.includes('queued')) return 'queued';
  if (st.every((x) => x === 'pending')) return 'pending';
  return 'running';
}

/** orderSteps puts the steps of one job instance in the order they run (each after the step
 * it depends on within the instance), keeping the API's order otherwise. */
export function orderSteps(steps) {
  const ids = new Set(steps.map((s) => s.stepId));
  const byId = new Map(steps.map((s) => [s.stepId, s]));
  const depth = new Map();
  const visit = (s, seen = new Set()) => {
    if (depth.has(s.stepId)) return depth.get(s.stepId);
    if (seen.has(s.stepId)) return 0;
    seen.add(s.stepId);
    let d = 0;
    for (const p of s.dependsOn || []) if (ids.has(p) && p !== s.stepId) d = Math.max(d, visit(byId.get(p), seen) + 1);
    depth.set(s.stepId, d);
    return d;
  };
  return steps.map((s, i) => ({ s, i, d: visit(s) })).sort((a, b) => a.d - b.d || a.i - b.i).map((x) => x.s);
}

/** stepName is a workflow step's own part of its id: `job/step` or `job/<i>/step` → `step`. */
export const stepName = (stepId) => stepId.slice(stepId.lastIndexOf('/') + 1);

const sum = (list) => list.reduce((t, s) => t + (s.costUsd || 0), 0);

/**
 * groupJobs turns a workflow run's jobs and the chain's steps into one node per job, in the
 * workflow's order: {id, name, dependsOn (needs), status, result, outcome, outputs, costUsd, steps
 * (in order, instance by instance), matrix, count, instances: [{instance, steps, status,
 * costUsd, done}]}.
 */
export function groupJobs(workflow, steps) {
  const jobs = workflow?.jobs || [];
  const ids = new Set(jobs.map((j) => j.id));
  const jobOf = (s) => s.job ?? s.stepId.split('/')[0];
  return jobs.map((j) => {
    const own = (steps || []).filter((s) => jobOf(s) === j.id);
    const matrix = j.instances != null;
    const instances = [];
    if (matrix) {
      const n = Math.max(j.instances, ...own.map((s) => (s.matrix ?? -1) + 1));
      for (let i = 0; i < n; i++) {
        const list = orderSteps(own.filter((s) => s.matrix === i));
        const done = list.length > 0 && list.every((s) => TERMINAL_STEP.has(s.status));
        instances.push({ instance: i, steps: list, status: liveStatus(list), costUsd: sum(list), done });
      }
    }
    return {
      id: j.id, name: j.name || j.id, job: j, kind: 'job',
      dependsOn: [...new Set(j.needs || [])].filter((d) => ids.has(d) && d !== j.id),
      status: j.result ? RESULT_STATUS[j.result] || j.result : liveStatus(own),
      result: j.result, outcome: j.outcome, outputs: j.outputs,
      steps: matrix ? instances.flatMap((i) => i.steps) : orderSteps(own),
      jobTypes: [...new Set(own.map((s) => s.jobType))],
      matrix, count: matrix ? j.instances : undefined, instances, costUsd: sum(own),
    };
  });
}

/** layoutWorkflow places a workflow run's jobs as layoutChain places steps. */
export function layoutWorkflow(workflow, steps) {
  return layoutGroups(groupJobs(workflow, steps));
}

/** reasonText says in words why a workflow step ended without running, or as it did. */
export function reasonText(reason) {
  if (!reason) return '';
  if (reason === 'if') return "skipped: its if was false";
  if (reason === 'job_if') return "skipped: its job's if was false";
  if (reason === 'job_timeout') return 'cancelled: its job ran out of timeout-minutes';
  if (reason.startsWith('cancelled_by:')) return `cancelled by fail-fast: ${reason.slice('cancelled_by:'.length)} failed`;
  if (reason.startsWith('parent_failed:')) return `skipped: ${reason.slice('parent_failed:'.length)} failed`;
  return reason.replaceAll('_', ' ');
}
