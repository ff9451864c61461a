// Browser tests of the web UI: headless Debian Chromium (/usr/bin/chromium, never a
// downloaded browser) driven by playwright-core, against a running stack.
//
//   SWITCHYARD_UI_ADMIN_KEY=... SWITCHYARD_UI_OTHER_KEY=... node tests/run.mjs http://127.0.0.1:8080
//
// The admin key's organisation does the work; the other key belongs to a second
// organisation that must see none of it. e2e/ui_test.go starts the stack and runs this
// (`npm test`). Screenshots of every page go to web/test-artifacts/.
import { chromium } from 'playwright-core';
import { mkdtemp, mkdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { autonomousTests } from './autonomous.mjs';
import { providersTests } from './providers.mjs';
import { usageTests } from './usage.mjs';
import { journeyTests } from './journey.mjs';

const base = (process.argv[2] || 'http://127.0.0.1:8080').replace(/\/$/, '');
const adminKey = process.env.SWITCHYARD_UI_ADMIN_KEY;
const otherKey = process.env.SWITCHYARD_UI_OTHER_KEY;
if (!adminKey || !otherKey) {
  console.error('set SWITCHYARD_UI_ADMIN_KEY and SWITCHYARD_UI_OTHER_KEY');
  process.exit(2);
}
const artifacts = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'test-artifacts');
await mkdir(artifacts, { recursive: true });

class Skip extends Error {}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function assert(cond, msg) {
  if (!cond) throw new Error('assertion failed: ' + msg);
}

async function call(key, method, p, body) {
  const res = await fetch(base + '/api/v1' + p, {
    method,
    headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function dispatch(jobType, prompt = 'Hello from the browser tests', payload = { prompt }) {
  const r = await call(adminKey, 'POST', '/dispatch', { job_type: jobType, payload });
  if (r.body?.code === 'UNSUPPORTED_EXECUTION_TYPE') {
    throw new Skip(`${jobType}: this build does not run its execution type yet (${r.body.message})`);
  }
  assert(r.status === 202, `dispatch ${jobType}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

async function waitRun(id, pred, what, timeout = 60000) {
  const deadline = Date.now() + timeout;
  let last;
  while (Date.now() < deadline) {
    last = (await call(adminKey, 'GET', '/dispatch/' + id)).body;
    if (pred(last)) return last;
    await sleep(100);
  }
  throw new Error(`run ${id}: ${what} not reached; last ${JSON.stringify(last)}`);
}

async function requireSkill(jobType) {
  const r = await call(adminKey, 'GET', '/skills/' + jobType);
  if (r.status !== 200) throw new Skip(`skill ${jobType} is not in the catalogue (GET /skills/${jobType}: ${r.status})`);
}

const chromiumArgs = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const dirs = [];
async function browserContext() {
  // A fresh profile (user-data-dir) per context: no state leaks between runs or organisations.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'switchyard-chromium-'));
  dirs.push(dir);
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: process.env.CHROME_BIN || '/usr/bin/chromium',
    headless: true, args: chromiumArgs, viewport: { width: 1400, height: 900 },
  });
  ctx.setDefaultTimeout(30000);
  const page = ctx.pages()[0] || (await ctx.newPage());
  page.on('pageerror', (e) => console.log('  [page error]', e.message));
  return { ctx, page };
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(artifacts, name + '.png'), fullPage: true });
}

async function signIn(page, key) {
  await page.goto(base + '/ui/');
  await page.locator('input[name=api_key]').fill(key);
  await page.locator('button[type=submit]').click();
  await page.locator('[data-testid=who]').waitFor();
}

// SWITCHYARD_UI_ONLY=<regexp> runs only the tests whose names match (and sign-in, which the
// others need), e.g. SWITCHYARD_UI_ONLY=chain.
const only = process.env.SWITCHYARD_UI_ONLY ? new RegExp(process.env.SWITCHYARD_UI_ONLY, 'i') : null;
const results = [];
let current = null;
async function test(name, fn) {
  if (only && !only.test(name) && !name.startsWith('sign in')) return;
  const t0 = Date.now();
  try {
    await fn();
    results.push({ name, status: 'ok' });
    console.log(`ok    ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    if (e instanceof Skip) {
      results.push({ name, status: 'skip' });
      console.log(`SKIP  ${name}: ${e.message}`);
      return;
    }
    results.push({ name, status: 'fail' });
    console.log(`FAIL  ${name}: ${e.stack || e}`);
    if (current) await shot(current, 'failed-' + name.replace(/\W+/g, '-')).catch(() => {});
  }
}

const A = await browserContext();
current = A.page;
const page = A.page;

await test('sign in with an API key, kept out of the URL and browser storage', async () => {
  await page.goto(base + '/ui/');
  await page.locator('input[name=api_key]').waitFor();
  await shot(page, '01-signin');
  await page.locator('input[name=api_key]').fill('sy_not_a_key');
  await page.locator('button[type=submit]').click();
  await page.locator('[data-testid=error]', { hasText: 'UNAUTHENTICATED' }).waitFor();
  await page.locator('input[name=api_key]').fill(adminKey);
  await page.locator('button[type=submit]').click();
  await page.locator('[data-testid=who]').waitFor();
  assert(!page.url().includes(adminKey), 'key in URL');
  const storage = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }));
  assert(!storage.includes(adminKey), 'key in browser storage');
  const cookie = (await A.ctx.cookies()).find((c) => c.name === 'sy_session');
  assert(cookie && cookie.httpOnly, 'HttpOnly sy_session cookie');
  assert(!cookie.value.includes(adminKey), 'key in cookie');
});

let llmJob;
await test('dashboard shows runs arriving live; llm_only tree is a line with billing', async () => {
  await page.goto(base + '/ui/#/runs');
  await page.locator('[data-testid=conn][data-state=live]').waitFor();
  const d = await dispatch('demo_llm');
  llmJob = d.jobId;
  // No reload: the row arrives over the organisation stream.
  await page.locator(`tr[data-job="${llmJob}"] [data-status=completed]`).waitFor({ timeout: 30000 });
  await shot(page, '02-dashboard');
  await page.locator('select[name=status]').selectOption('failed');
  await page.locator(`tr[data-job="${llmJob}"]`).waitFor({ state: 'detached' });
  await page.locator('select[name=status]').selectOption('completed');
  await page.locator(`tr[data-job="${llmJob}"]`).waitFor();
  await page.locator('input[name=job_type]').fill('no_such_skill');
  await page.locator('input[name=job_type]').press('Enter');
  await page.locator('input[name=job_type]').blur();
  await page.locator('[data-testid=empty]').waitFor();
  await shot(page, '03-dashboard-empty-filter');

  await page.goto(base + '/ui/#/runs/' + llmJob);
  await page.locator('[data-testid=line] [data-span-type=llm_call] [data-testid=billing]').waitFor();
  assert((await page.locator('[data-testid=tier]').textContent()) === 'llm_only', 'tier');
  const total = await page.locator('[data-testid=total]').textContent();
  assert(/\$0\.\d{6}/.test(total), 'running total shown: ' + total);
  await shot(page, '04-run-llm_only');
});

await test('edit a binding: field errors beside the field, history, next dispatch uses it', async () => {
  await page.goto(base + '/ui/#/skills');
  await page.locator('input[name=q]').fill('demo_llm');
  await page.locator('tr[data-skill=demo_llm]').waitFor();
  await shot(page, '05-skills');
  await page.locator('tr[data-skill=demo_llm] a').click();
  await page.locator('[data-testid=version]').waitFor();
  const v0 = Number((await page.locator('[data-testid=version]').textContent()).replace(/\D+/g, ''));

  await page.locator('input[name=max_tokens]').fill('-5');
  await page.locator('[data-testid=save]').click();
  await page.locator('[data-field=max_tokens] [data-testid=error-max_tokens]').waitFor();
  await shot(page, '06-skill-validation');

  await page.locator('input[name=max_tokens]').fill('64');
  await page.locator('textarea[name=system_prompt]').fill('You answer briefly. (edited by the browser tests)');
  await page.locator('[data-testid=save]').click();
  await page.locator('[data-testid=version]', { hasText: `version ${v0 + 1}` }).waitFor();
  const firstRow = page.locator('[data-testid=history] tbody tr').first();
  await firstRow.locator('td').first().filter({ hasText: new RegExp(`^${v0 + 1}$`) }).waitFor();
  const who = await firstRow.locator('td').nth(2).textContent();
  assert(who.startsWith('key:'), 'history names who: ' + who);
  assert((await firstRow.locator('td').nth(3).textContent()).match(/\d/), 'history says when');
  await shot(page, '07-skill-edited');

  const d = await dispatch('demo_llm');
  const run = await waitRun(d.jobId, (r) => r.skillVersion !== undefined, 'read');
  assert(run.skillVersion === v0 + 1, `next dispatch uses version ${v0 + 1}, got ${run.skillVersion}`);
  const snap = await waitRun(d.jobId, (r) => r.status === 'completed', 'completed', 30000);
  assert(snap.status === 'completed', 'completes with the edited binding');
});

await test('approve a held job and watch it complete', async () => {
  await requireSkill('demo_critical');
  const d = await dispatch('demo_critical', 'Please review: contact jane.doe@example.com');
  assert(d.status === 'held_for_review', 'held: ' + d.status);
  await page.goto(base + '/ui/#/reviews');
  const card = page.locator(`article[data-job="${d.jobId}"]`);
  await card.waitFor();
  assert((await card.locator('.reasons li').count()) > 0, 'hold reasons shown');
  const payload = await card.locator('[data-testid=payload]').textContent();
  assert(!payload.includes('jane.doe@example.com'), 'PII masked in the review payload: ' + payload);
  await shot(page, '08-reviews');
  await card.locator('input[name=reason]').fill('looks fine');
  await card.locator('[data-testid=approve]').click();
  await page.locator('[data-testid=decided]').waitFor();
  await page.goto(base + '/ui/#/runs/' + d.jobId);
  await page.locator('.facts [data-status=completed]').waitFor({ timeout: 60000 });
  await page.locator('[data-span-type=llm_call] [data-testid=billing]').first().waitFor();
  if ((await page.locator('[data-span-type=governance_review]').count()) === 0) {
    console.log('  note: no governance_review span in the approved run\'s tree');
  }
  await shot(page, '09-approved-run');
});

await test('cancel a run from its page', async () => {
  await requireSkill('demo_critical');
  const d = await dispatch('demo_critical', 'to be cancelled');
  await page.goto(base + '/ui/#/runs/' + d.jobId);
  await page.locator('[data-testid=cancel]').click();
  await page.locator('.facts [data-status=cancelled]').waitFor();
  await shot(page, '10-cancelled');
});

await test('a ReAct run\'s tree grows live', async () => {
  await requireSkill('demo_react');
  const d = await dispatch('demo_react', 'What is the weather in Paris and in Rome?');
  await page.goto(base + '/ui/#/runs/' + d.jobId);
  const iterations = page.locator('[data-span-type=react_iteration]');
  const seen = [];
  let midShot = false;
  const deadline = Date.now() + 60000;
  for (;;) {
    assert(Date.now() < deadline, 'the run did not finish; iteration counts seen: ' + seen);
    const n = await iterations.count();
    const status = await page.locator('.facts [data-status]').getAttribute('data-status').catch(() => null);
    if (seen[seen.length - 1] !== n) seen.push(n);
    if (n >= 1 && !midShot) { await shot(page, '11-react-growing'); midShot = true; }
    if (['completed', 'completed_max_iterations', 'failed', 'completed_budget_exhausted'].includes(status)) {
      assert(status !== 'failed', 'the ReAct run failed: ' + (await page.locator('.banner.error').allTextContents()));
      break;
    }
    await sleep(50);
  }
  const final = await iterations.count();
  assert(final >= 2, 'at least two iterations, got ' + final);
  assert(seen.filter((n) => n > 0 && n < final).length > 0, 'the tree was seen with fewer iterations before it finished: ' + seen);
  const calls = await page.locator('[data-span-type=llm_call]').count();
  const billed = await page.locator('[data-span-type=llm_call] [data-testid=billing]').count();
  assert(calls > 0 && calls === billed, `billing on every llm_call node (${billed}/${calls})`);
  // Each iteration is labelled with its own number (its step's), and every executor node
  // carries the attempt that made it; one attempt, so no node needs to say which.
  for (let i = 0; i < final; i++) {
    const node = iterations.nth(i);
    const label = (await node.locator('.ntype').textContent()).trim();
    const name = (await node.locator('.nname').textContent()).trim();
    assert(label === name, `iteration label "${label}" matches its span "${name}"`);
    assert((await node.getAttribute('data-attempt')) === '1', 'the first attempt made the iteration');
  }
  assert((await page.locator('[data-testid=attempt]').count()) === 0, 'a run of one attempt shows no attempt labels');
  await shot(page, '12-react-done');
});

await test('the dashboard tells 150 runs apart and pages back to the oldest', async () => {
  await requireSkill('demo_critical');
  // 150 runs created together (one batch, so their ids share their leading time digits).
  // demo_critical holds each for review, so no worker runs them; they are cancelled at once.
  const items = Array.from({ length: 150 }, (_, i) => ({ job_type: 'demo_critical', payload: { prompt: `paging ${i}` } }));
  const batch = await call(adminKey, 'POST', '/dispatch/batch', { items });
  assert(batch.status === 207, `batch: ${batch.status} ${JSON.stringify(batch.body).slice(0, 300)}`);
  const ids = batch.body.items.map((it) => it.result?.jobId);
  assert(ids.every(Boolean), 'every batch item accepted: ' + JSON.stringify(batch.body.items.find((it) => !it.result)));
  for (const id of ids) {
    const r = await call(adminKey, 'POST', `/dispatch/${id}/cancel`);
    assert(r.status === 200, `cancel ${id}: ${r.status}`);
  }
  // Every run of the organisation, newest first, through the API's cursor.
  const all = [];
  let cursor = '';
  do {
    const r = await call(adminKey, 'GET', '/dispatch?limit=200' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
    all.push(...r.body.items.map((x) => x.jobId));
    cursor = r.body.nextCursor;
  } while (cursor);
  assert(all.length >= 150, 'listed ' + all.length);

  await page.goto(base + '/ui/#/runs');
  await page.locator('[data-testid=conn][data-state=live]').waitFor();
  await page.locator('tr[data-job]').first().waitFor();
  const rows = page.locator('tr[data-job]');
  const first = await rows.count();
  assert(first < all.length, `the first page (${first} rows) is not every run (${all.length})`);
  let pages = 1;
  while (await page.locator('[data-testid=load-more]').count()) {
    const n = await rows.count();
    await page.locator('[data-testid=load-more]').click();
    await page.waitForFunction((n) => document.querySelectorAll('tr[data-job]').length > n ||
      !document.querySelector('[data-testid=load-more]'), n);
    assert(++pages < 20, 'paging ends');
  }
  const shown = await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.job));
  assert(shown.length === all.length, `every run shown after ${pages} pages: ${shown.length}/${all.length}`);
  assert(shown.every((id, i) => id === all[i]), 'in the API\'s order, newest first, ending with the oldest');
  assert((await page.locator('[data-testid=runs-count]').textContent()).includes('oldest'), 'says the oldest is shown');
  const labels = await page.locator('tr[data-job] [data-testid=job-label]').allTextContents();
  assert(labels.length === shown.length, `a label on every row (${labels.length}/${shown.length})`);
  assert(new Set(labels).size === labels.length, `labels tell runs apart: ${new Set(labels).size} distinct of ${labels.length}`);
  labels.forEach((l, i) => assert(shown[i].endsWith(l.replace(/^…/, '')), `label ${l} is part of ${shown[i]}`));
  await shot(page, '13-dashboard-paged');

  // The copy button copies the whole id.
  await A.ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  const oldest = page.locator(`tr[data-job="${all[all.length - 1]}"]`);
  await oldest.locator('[data-testid=copy-id]').click();
  await oldest.locator('[data-testid=copy-id]', { hasText: 'copied' }).waitFor();
  assert((await page.evaluate(() => navigator.clipboard.readText())) === all[all.length - 1], 'the full id is copied');
});

// watchSteps records, in the page, every status each DAG node shows, in order: a node that
// went pending → running → completed while watched has ['pending', 'running', 'completed']
// (a status shown between two renders may be missed, never invented). It also marks the
// document, so a reload is detected (the mark would be gone).
async function watchSteps(p) {
  await p.evaluate(() => {
    window.__noReload = true;
    window.__seen = {};
    const record = () => {
      for (const el of document.querySelectorAll('.cnode[data-step]')) {
        const seen = (window.__seen[el.dataset.step] ||= []);
        if (seen[seen.length - 1] !== el.dataset.status) seen.push(el.dataset.status);
      }
    };
    record();
    new MutationObserver(record).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-status'] });
  });
}

// inOrder says whether want's statuses appear in list in that order (others may come between).
function inOrder(list, want) {
  let i = 0;
  for (const w of want) {
    i = (list || []).indexOf(w, i);
    if (i < 0) return false;
    i++;
  }
  return true;
}

await test('a chain runs live: its DAG nodes go pending → running → completed without a reload', async () => {
  await requireSkill('demo_research');
  const d = await dispatch('demo_research', '', { topic: 'the range of electric cars' });
  assert(d.chainId, '202 names the chain: ' + JSON.stringify(d));
  await page.goto(base + '/ui/#/runs/' + d.jobId);
  await page.locator('[data-testid=chain-dag] .cnode').first().waitFor();
  await watchSteps(page);
  await page.locator('[data-testid=conn][data-state=live]').waitFor();
  await shot(page, '16-chain-running');
  await page.locator('[data-testid=chain-status]:not([data-status=running])').waitFor({ timeout: 90000 });
  const status = await page.locator('[data-testid=chain-status]').getAttribute('data-status');
  const seen = await page.evaluate(() => window.__seen);
  assert(await page.evaluate(() => window.__noReload === true), 'the page was not reloaded');
  assert(status === 'completed', `the chain completed, got ${status}; statuses seen ${JSON.stringify(seen)}`);
  const lived = Object.entries(seen).filter(([, l]) => inOrder(l, ['pending', 'running', 'completed']));
  assert(lived.length > 0, 'some step was seen pending, then running, then completed: ' + JSON.stringify(seen));
  // Every step ended completed or skipped (demo_research's condition may skip a branch).
  const finals = await page.locator('.cnode[data-step]').evaluateAll((els) => els.map((e) => [e.dataset.step, e.dataset.status]));
  assert(finals.length >= 3, 'the DAG has its steps: ' + JSON.stringify(finals));
  assert(finals.every(([, st]) => st === 'completed' || st === 'skipped'), 'every step ended: ' + JSON.stringify(finals));
  const api = (await call(adminKey, 'GET', '/chains/' + d.chainId)).body;
  for (const [step, st] of finals) {
    const entries = api.steps.filter((s) => s.stepId === step);
    assert(entries.length > 0, `${step} is a step of the API's chain`);
    // A for_each step's node shows what its instances add up to; any other step, its own status.
    if (entries.length === 1) assert(entries[0].status === st, `${step}: the node shows ${st}, the API ${entries[0].status}`);
  }
  // Fork/join counters, progress and cost.
  const joins = await page.locator('[data-testid=counter-join]').allTextContents();
  assert(joins.every((t) => /^join (\d+)\/\1 done$/.test(t.trim())), 'every join counts all its parents done: ' + joins);
  assert((await page.locator('[data-testid=progress]').textContent()).startsWith('100%'), 'progress 100%');
  const total = await page.locator('[data-testid=chain-cost]').textContent();
  assert(/^\$0\.\d{6}$/.test(total) && Number(total.slice(1)) > 0, 'total cost shown: ' + total);
  assert(Math.abs(Number(total.slice(1)) - api.costUsd) < 1e-6, `total ${total} is the API's ${api.costUsd}`);
  await shot(page, '17-chain-completed');
  // A node drills into its step's own span tree, with billing.
  const done = finals.find(([, st]) => st === 'completed')[0];
  await page.locator(`.cnode[data-step="${done}"]`).click();
  await page.locator(`[data-testid=step-detail] [data-span-type=llm_call] [data-testid=billing]`).first().waitFor();
  await shot(page, '18-chain-step-tree');
  // The runs list shows the chain's parent as a chain, and its steps as steps.
  await page.goto(base + '/ui/#/runs');
  await page.locator(`tr[data-job="${d.jobId}"] [data-testid=chain-tag]`).waitFor();
  assert((await page.locator(`tr[data-chain="${d.chainId}"] [data-testid=chain-step-tag]`).count()) > 0, 'step runs tagged');
  await shot(page, '19-runs-with-chain');
});

await test('a held chain step is approved from the DAG and the chain goes on', async () => {
  // demo_audit: scan → remediate (demo_critical, held for review every time) → report.
  await requireSkill('demo_audit');
  const d = await dispatch('demo_audit', '', { system: 'the billing service' });
  assert(d.chainId, '202 names the chain: ' + JSON.stringify(d));
  await page.goto(base + '/ui/#/runs/' + d.jobId);
  const held = page.locator('.cnode[data-status=held_for_review]');
  await held.first().waitFor({ timeout: 60000 });
  await watchSteps(page);
  const step = await held.first().getAttribute('data-step');
  const stepJob = await held.first().getAttribute('data-job');
  assert(stepJob, 'the held node names its run');
  const before = (await call(adminKey, 'GET', '/dispatch/' + stepJob)).body;
  assert(before.status === 'held_for_review' && before.chainId === d.chainId && before.chainStep === step,
    'the API has the step run held, in the chain: ' + JSON.stringify(before).slice(0, 300));
  assert((await page.locator('[data-testid=chain-status]').getAttribute('data-status')) === 'running', 'the chain waits on it');
  await shot(page, '20-chain-held');
  await held.first().locator('[data-testid=approve-step]').click();
  await page.locator('[data-testid=note]', { hasText: `Approved step ${step}` }).waitFor();
  await page.locator(`.cnode[data-step="${step}"][data-status=completed]`).waitFor({ timeout: 60000 });
  // The chain may hold further steps: approve each from its node, until the chain ends.
  const deadline = Date.now() + 90000;
  while ((await page.locator('[data-testid=chain-status]').getAttribute('data-status')) === 'running') {
    assert(Date.now() < deadline, 'the chain did not end: ' + JSON.stringify(await page.evaluate(() => window.__seen)));
    const next = page.locator('.cnode[data-status=held_for_review] [data-testid=approve-step]');
    if (await next.count()) await next.first().click().catch(() => {}); // it may have re-rendered meanwhile
    await sleep(100);
  }
  await page.locator('[data-testid=chain-status][data-status=completed]').waitFor({ timeout: 1000 });
  const seen = await page.evaluate(() => window.__seen);
  assert(inOrder(seen[step], ['held_for_review', 'completed']), `${step} went from held to completed: ${seen[step]}`);
  assert(await page.evaluate(() => window.__noReload === true), 'the page was not reloaded');
  const after = (await call(adminKey, 'GET', '/dispatch/' + stepJob)).body;
  assert(after.status === 'completed', 'the step run completed: ' + after.status);
  await shot(page, '21-chain-approved');
});

await test('a chain is cancelled from its page, re-run, and its held step rejected from the DAG', async () => {
  await requireSkill('demo_audit');
  const d = await dispatch('demo_audit', '', { system: 'the payroll service' });
  await page.goto(base + '/ui/#/runs/' + d.jobId);
  await page.locator('.cnode[data-status=held_for_review]').first().waitFor({ timeout: 60000 });
  const done = await page.locator('.cnode[data-status=completed]').evaluateAll((els) => els.map((e) => e.dataset.step));
  await page.locator('[data-testid=chain-cancel]').click();
  await page.locator('[data-testid=chain-status][data-status=cancelled]').waitFor();
  await page.locator('.cnode[data-status=held_for_review]').waitFor({ state: 'detached' });
  await shot(page, '22-chain-cancelled');

  await page.locator('[data-testid=chain-rerun]').click();
  await page.waitForFunction((id) => location.hash.startsWith('#/runs/') && !location.hash.endsWith(id), d.jobId);
  const rerun = page.locator('[data-testid=chain-status][data-status=running]');
  await rerun.waitFor();
  const chainId = await page.locator('section.chain').getAttribute('data-chain');
  assert(chainId !== d.chainId, 'a new chain');
  assert((await call(adminKey, 'GET', '/chains/' + chainId)).body.rerunOf === d.chainId, 'the API says it re-runs the first');
  // The steps that had completed are taken over; the held one is held again.
  const held = page.locator('.cnode[data-status=held_for_review]').first();
  await held.waitFor({ timeout: 60000 });
  for (const step of done) assert((await page.locator(`.cnode[data-step="${step}"]`).getAttribute('data-status')) === 'completed', `${step} reused`);
  await held.locator('[data-testid=reject-step]').click();
  assert(await held.locator('[data-testid=reject-confirm]').isDisabled(), 'rejecting needs a reason');
  await held.locator('input[name=reason]').fill('wrong supplier');
  await held.locator('[data-testid=reject-confirm]').click();
  await page.locator('[data-testid=chain-status]:not([data-status=running])').waitFor({ timeout: 60000 });
  const status = await page.locator('[data-testid=chain-status]').getAttribute('data-status');
  assert(status === 'failed', 'a rejected step fails the chain under abort: ' + status);
  assert((await page.locator('.cnode[data-status=rejected]').count()) === 1, 'the step shows rejected');
  await shot(page, '23-chain-rejected');
});

// uiWorkflow: a matrix job of three instances, one at a time, whose second step runs in
// one instance only (skipped by its if in the others), then a job that needs it; the
// workflow's output is the last job's.
const uiWorkflow = `name: UI fan-out
on:
  workflow_dispatch:
    inputs:
      topic:
        type: string
        required: true
  workflow_call:
    inputs:
      topic:
        type: string
        required: true
    outputs:
      summary:
        value: \${{ jobs.join.outputs.summary }}
jobs:
  fan:
    name: Fan out
    runs-on: any
    strategy:
      max-parallel: 1
      matrix:
        n: [1, 2, 3]
    steps:
      - id: part
        uses: ./skills/demo_llm
        with:
          prompt: "Part \${{ matrix.n }} of \${{ inputs.topic }}"
      - id: extra
        if: matrix.n == 2
        uses: ./skills/demo_llm
        with:
          prompt: "More on part \${{ matrix.n }}"
  join:
    runs-on: any
    needs: fan
    outputs:
      summary: \${{ steps.combine.outputs.result }}
    steps:
      - id: combine
        uses: ./skills/demo_llm
        with:
          prompt: "Combine the parts on \${{ inputs.topic }}"
`;

await test('a workflow run is drawn as its jobs: matrix counter, results, steps with reasons, span trees', async () => {
  await requireSkill('demo_llm');
  const r = await call(adminKey, 'POST', '/workflows/run', { workflow: uiWorkflow, inputs: { topic: 'otters' } });
  assert(r.status === 202 && r.body.chainId, 'POST /workflows/run: ' + r.status + ' ' + JSON.stringify(r.body));
  const { jobId, chainId } = r.body;
  await page.goto(base + '/ui/#/runs/' + jobId);
  await page.locator('[data-testid=workflow-dag] .cnode[data-wfjob=fan]').waitFor();
  // Record every status each job node and every text the matrix counter shows, in order.
  await page.evaluate(() => {
    window.__noReload = true;
    window.__jobs = {};
    window.__counter = [];
    const record = () => {
      for (const el of document.querySelectorAll('.cnode[data-wfjob]')) {
        const seen = (window.__jobs[el.dataset.wfjob] ||= []);
        if (seen[seen.length - 1] !== el.dataset.status) seen.push(el.dataset.status);
      }
      const c = document.querySelector('.cnode[data-wfjob=fan] [data-testid=counter-matrix]')?.textContent.trim();
      if (c && window.__counter[window.__counter.length - 1] !== c) window.__counter.push(c);
    };
    record();
    new MutationObserver(record).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ['data-status'] });
  });
  assert((await page.locator('[data-testid=chain-dag]').count()) === 0, 'a workflow is not drawn as its steps');
  assert((await page.locator('[data-testid=workflow-name]').textContent()) === 'UI fan-out', 'the workflow\'s name is shown');
  await shot(page, '24-workflow-running');
  await page.locator('[data-testid=chain-status]:not([data-status=running])').waitFor({ timeout: 90000 });
  const status = await page.locator('[data-testid=chain-status]').getAttribute('data-status');
  const jobs = await page.evaluate(() => window.__jobs);
  const counter = await page.evaluate(() => window.__counter);
  assert(status === 'completed', `the workflow completed, got ${status}; jobs seen ${JSON.stringify(jobs)}`);
  assert(await page.evaluate(() => window.__noReload === true), 'the page was not reloaded');

  // One node per job, an edge from needs, the API's results.
  const nodes = await page.locator('.cnode[data-wfjob]').evaluateAll((els) => els.map((e) => [e.dataset.wfjob, e.dataset.result]));
  assert(JSON.stringify(nodes) === JSON.stringify([['fan', 'success'], ['join', 'success']]), 'job nodes: ' + JSON.stringify(nodes));
  assert((await page.locator('[data-edge="fan>join"]').count()) === 1, 'an edge fan → join');
  const api = (await call(adminKey, 'GET', '/chains/' + chainId)).body;
  assert(api.workflow.jobs.every((j) => j.result === 'success'), 'the API says both succeeded: ' + JSON.stringify(api.workflow));
  const fan = page.locator('.cnode[data-wfjob=fan]');
  assert((await fan.locator('[data-testid=job-name]').textContent()) === 'Fan out', 'the job\'s name');
  assert((await fan.locator('[data-testid=job-status]').textContent()) === 'success', 'the job\'s result');
  assert((await fan.locator('[data-testid=counter-matrix]').textContent()).trim() === '3/3 instances done', 'matrix counter');
  assert((await fan.locator('.chip[data-instance]').count()) === 3, 'a chip per instance');
  // Live: join waited (max-parallel 1 runs the instances one after another) and the counter counted up.
  assert(inOrder(jobs.join, ['pending', 'completed']), 'join seen pending, then completed: ' + JSON.stringify(jobs));
  assert(inOrder(counter, ['1/3 instances done', '3/3 instances done']) || inOrder(counter, ['2/3 instances done', '3/3 instances done']),
    'the counter counted up while watched: ' + JSON.stringify(counter));
  const fanCost = api.steps.filter((s) => s.job === 'fan').reduce((t, s) => t + s.costUsd, 0);
  const shown = Number((await fan.locator('[data-testid=job-cost]').textContent()).slice(1));
  assert(fanCost > 0 && Math.abs(shown - fanCost) < 1e-6, `job cost ${shown} is its steps' ${fanCost}`);
  // The workflow's outputs, once ended.
  const outputs = JSON.parse(await page.locator('[data-testid=workflow-outputs]').textContent());
  assert(typeof outputs.summary === 'string' && outputs.summary.length > 0, 'workflow outputs: ' + JSON.stringify(outputs));
  await shot(page, '25-workflow-completed');

  // The job's steps, instance by instance, with why a step did not run.
  await fan.click();
  const detail = page.locator('[data-testid=job-detail][data-wfjob=fan]');
  await detail.waitFor();
  assert((await detail.locator('.instance').count()) === 3, 'three instances listed');
  const rows = await detail.locator('li[data-step]').evaluateAll((els) => els.map((e) => [e.dataset.step, e.dataset.status, e.dataset.reason]));
  const want = api.steps.filter((s) => s.job === 'fan').sort((a, b) => a.matrix - b.matrix || (a.stepId.endsWith('/part') ? -1 : 1))
    .map((s) => [s.stepId, s.status, s.reason || '']);
  assert(JSON.stringify(rows) === JSON.stringify(want), `steps in order: ${JSON.stringify(rows)}, API ${JSON.stringify(want)}`);
  const skipped = rows.filter(([, st]) => st === 'skipped');
  assert(skipped.length === 2 && skipped.every(([, , why]) => why === 'if'), 'extra skipped by its if in two instances: ' + JSON.stringify(rows));
  assert((await detail.locator('li[data-status=skipped] [data-testid=step-reason]').first().textContent()) === 'skipped: its if was false', 'the reason in words');
  // A chip shows one instance; a step drills into its run's span tree.
  const one = api.steps.find((s) => s.job === 'fan' && s.matrix === 1 && s.stepId.endsWith('/part'));
  await fan.locator('.chip[data-instance="1"]').click();
  await page.locator('[data-testid=job-detail] .instance').nth(1).waitFor({ state: 'detached' });
  assert((await detail.locator('.instance').getAttribute('data-instance')) === '1', 'only instance 1');
  await detail.locator(`li[data-step="${one.stepId}"]`).click();
  await page.locator(`[data-testid=step-detail][data-step="${one.stepId}"] [data-span-type=llm_call] [data-testid=billing]`).first().waitFor();
  await shot(page, '26-workflow-step-tree');
  // The job after it: its steps, its outputs.
  await page.locator('.cnode[data-wfjob=join]').click();
  await page.locator('[data-testid=job-detail][data-wfjob=join] [data-testid=job-outputs]').waitFor();
  assert((await page.locator('[data-testid=job-detail][data-wfjob=join] li[data-step]').count()) === 1, 'join has one step');
});

await autonomousTests({ test, page, base, adminKey, call, dispatch, waitRun, requireSkill, shot, assert, sleep, Skip });
await providersTests({ test, page, base, adminKey, call, shot, assert, Skip });

await test('a second organisation sees none of the first one\'s runs', async () => {
  const B = await browserContext();
  current = B.page;
  try {
    await signIn(B.page, otherKey);
    await B.page.goto(base + '/ui/#/runs');
    await B.page.locator('[data-testid=conn][data-state=live]').waitFor();
    await B.page.locator('[data-testid=empty]').waitFor();
    const d = await dispatch('demo_llm');
    await waitRun(d.jobId, (r) => r.status === 'completed', 'completed', 30000);
    // The first organisation's dashboard got it live; give the other the same chance.
    await page.goto(base + '/ui/#/runs');
    await page.locator(`tr[data-job="${d.jobId}"]`).waitFor();
    assert((await B.page.locator('tr[data-job]').count()) === 0, 'no runs of the first organisation');
    await shot(B.page, '14-other-org-dashboard');
    await B.page.goto(base + '/ui/#/runs/' + d.jobId);
    await B.page.locator('[data-testid=error]', { hasText: 'JOB_NOT_FOUND' }).waitFor();
    await shot(B.page, '15-other-org-run');
    const list = await call(otherKey, 'GET', '/dispatch');
    assert(list.status === 200 && list.body.items.length === 0, 'API list is empty for the other org');
  } finally {
    current = page;
    await B.ctx.close();
  }
});

await usageTests({ test, page, base, call, waitRun, shot, assert, adminKey, otherKey, browserContext, signIn, sleep,
  setCurrent: (p) => { current = p; } });

await journeyTests({ test, page, base, call, browserContext, signIn, shot, assert, sleep, Skip,
  setCurrent: (p) => { current = p; } });

await A.ctx.close();
await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
const failed = results.filter((r) => r.status === 'fail');
console.log(`\n${results.length - failed.length}/${results.length} passed (${results.filter((r) => r.status === 'skip').length} skipped); screenshots in ${artifacts}`);
process.exit(failed.length ? 1 : 0);
