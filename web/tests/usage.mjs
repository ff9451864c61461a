// Browser tests of the usage page (#/usage), run by run.mjs with its helpers: a few jobs
// are run, then the page's charts, top skills, month meters and CSV download are compared
// with GET /api/v1/admin/usage, and a second organisation sees none of it.
import { readFile } from 'node:fs/promises';

export async function usageTests(h) {
  const { test, page, base, call, waitRun, shot, assert, adminKey, otherKey, browserContext, signIn, sleep, setCurrent } = h;
  const close = (a, b) => Math.abs(a - b) < 1e-6;

  // The ledger is written by the router shortly after a call; wait until the report stops moving.
  async function settledUsage(key, q, pred = () => true) {
    let last = null;
    const deadline = Date.now() + 30000;
    while (Date.now() < deadline) {
      const r = await call(key, 'GET', '/admin/usage' + q);
      assert(r.status === 200, `usage: ${r.status} ${JSON.stringify(r.body)}`);
      if (pred(r.body) && last && JSON.stringify(last) === JSON.stringify(r.body)) return r.body;
      last = r.body;
      await sleep(400);
    }
    throw new Error('usage did not settle: ' + JSON.stringify(last).slice(0, 500));
  }

  // The chart's bars, per day, added up, and the keys drawn.
  async function chartBars() {
    return page.locator('[data-testid=usage-chart] rect[data-key]').evaluateAll((els) =>
      els.map((e) => ({ day: e.dataset.day, key: e.dataset.key, value: Number(e.dataset.value) })));
  }
  function checkChart(bars, api, dim, metric) {
    const perDay = {};
    for (const b of bars) perDay[b.day] = (perDay[b.day] || 0) + b.value;
    for (const d of api.byDay) {
      const want = d[metric];
      assert(metric === 'tokens' ? perDay[d.day] === want : close(perDay[d.day] || 0, want),
        `${dim}/${metric}: bars of ${d.day} add up to ${perDay[d.day]}, the API says ${want}`);
    }
    // The largest keys of the period are drawn under their own name.
    const totals = {};
    for (const p of api.daily[dim]) totals[p.key] = (totals[p.key] || 0) + p[metric];
    const top = Object.entries(totals).sort((a, b) => b[1] - a[1]).slice(0, 3).map(([k]) => k || '(none)');
    const keys = new Set(bars.map((b) => b.key));
    for (const k of top) assert(keys.has(k), `${dim}: ${k} drawn (drawn: ${[...keys].join(', ')})`);
  }

  await test('usage page: cost and tokens per day by skill, model, provider and user, top skills, the month, CSV', async () => {
    const now = new Date();
    const q = `?from=${now.toISOString().slice(0, 8)}01&to=${new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString().slice(0, 10)}`;
    const before = await settledUsage(adminKey, q);
    const ids = [];
    for (const user of ['ana', 'ben', 'ana']) {
      const r = await call(adminKey, 'POST', '/dispatch', { job_type: 'demo_llm', user_id: user, payload: { prompt: 'usage page ' + user } });
      assert(r.status === 202, `dispatch: ${r.status} ${JSON.stringify(r.body)}`);
      ids.push(r.body.jobId);
    }
    for (const id of ids) await waitRun(id, (r) => r.status === 'completed', 'completed', 60000);
    const api = await settledUsage(adminKey, q, (u) => u.calls >= before.calls + 3);
    const llm = api.bySkill.find((s) => s.key === 'demo_llm');
    assert(llm && llm.costUsd > 0, 'demo_llm has a cost: ' + JSON.stringify(api.bySkill));

    await page.goto(base + '/ui/#/usage');
    await page.locator('header nav a[href="#/usage"].active').waitFor();
    await page.locator('[data-testid=top-skills] tr[data-key=demo_llm]').waitFor();
    assert(close(Number(await page.locator('[data-testid=total-cost]').getAttribute('data-value')), api.costUsd), 'total cost is the API\'s');
    // The top skills, largest cost first, each with the API's cost.
    const rows = await page.locator('[data-testid=top-skills] tbody tr').evaluateAll((els) =>
      els.map((e) => [e.dataset.key, Number(e.querySelector('[data-testid=cost]').dataset.value)]));
    assert(JSON.stringify(rows.map((r) => r[0])) === JSON.stringify(api.bySkill.slice(0, 10).map((s) => s.key)), 'top skills in the API\'s order: ' + JSON.stringify(rows));
    for (const [k, c] of rows) assert(close(c, api.bySkill.find((s) => s.key === k).costUsd), `cost of ${k}`);
    assert(rows.some(([k]) => k === 'demo_llm'), 'demo_llm among the top skills');
    await page.locator('[data-testid=by-user] tr[data-key=ana]').waitFor();
    // The month against the quota and the budget.
    assert((await page.locator('[data-testid=this-month] [data-testid=quota]').textContent()).includes('Tokens'), 'quota meter');
    await page.locator('[data-testid=this-month] [data-testid=budget]').waitFor();
    // Cost per day by skill, then by model, provider and user; tokens too.
    checkChart(await chartBars(), api, 'skill', 'costUsd');
    await shot(page, '30-usage');
    for (const dim of ['model', 'provider', 'user']) {
      await page.locator(`.tabs button[data-dim=${dim}]`).click();
      await page.locator(`[data-testid=usage-chart][data-dim=${dim}]`).waitFor();
      checkChart(await chartBars(), api, dim, 'costUsd');
    }
    assert(await page.locator('[data-testid=usage-chart] rect[data-key=ana]').count() > 0, 'ana has bars');
    await page.locator('select[name=metric]').selectOption('tokens');
    await page.locator('[data-testid=usage-chart][data-dim=user][data-metric=tokens]').waitFor();
    checkChart(await chartBars(), api, 'user', 'tokens');
    await shot(page, '31-usage-tokens-by-user');

    // The CSV download: the same calls and cost, one row per day, skill, provider, model and user.
    const [dl] = await Promise.all([page.waitForEvent('download'), page.locator('[data-testid=csv]').click()]);
    assert(/^usage-.*\.csv$/.test(dl.suggestedFilename()), 'file name ' + dl.suggestedFilename());
    const lines = (await readFile(await dl.path(), 'utf8')).trim().split('\n');
    assert(lines[0] === 'day,job_type,provider,model,user_id,tokens_in,tokens_out,tokens_cached,tokens,cost_usd,calls,unknown_calls', 'CSV header ' + lines[0]);
    const cells = lines.slice(1).map((l) => l.split(','));
    const csvCost = cells.reduce((t, c) => t + Number(c[9]), 0);
    const csvCalls = cells.reduce((t, c) => t + Number(c[10]), 0);
    assert(close(csvCost, api.costUsd) && csvCalls === api.calls, `CSV adds up to $${csvCost} and ${csvCalls} calls; the API: $${api.costUsd}, ${api.calls}`);
    assert(cells.some((c) => c[1] === 'demo_llm' && c[4] === 'ana'), 'a demo_llm row of ana');

    // Pseudonymised users: no id is shown, the API's pseudonyms are.
    await page.locator('input[name=pseudonymise]').check();
    await page.locator('[data-testid=by-user] tr[data-key^=u_]').first().waitFor();
    assert(await page.locator('[data-testid=by-user] tr[data-key=ana]').count() === 0, 'ana is not shown');
    const pseud = await settledUsage(adminKey, q + '&pseudonymise=true');
    const shown = await page.locator('[data-testid=by-user] tr[data-key]').evaluateAll((els) => els.map((e) => e.dataset.key));
    assert(pseud.byUser.slice(0, 10).every((u) => shown.includes(u.key)), 'the API\'s pseudonyms: ' + JSON.stringify(shown));
    await shot(page, '32-usage-pseudonymised');
  });

  await test('usage page: a second organisation sees none of the first one\'s usage', async () => {
    const B = await browserContext();
    setCurrent(B.page);
    try {
      await signIn(B.page, otherKey);
      const other = await call(otherKey, 'GET', '/admin/usage');
      if (other.status === 403) {
        // The other organisation's key may lack admin: then the page says so.
        await B.page.goto(base + '/ui/#/usage');
        await B.page.locator('[data-testid=error]', { hasText: 'FORBIDDEN' }).waitFor();
        return;
      }
      assert(other.status === 200, 'other usage ' + other.status);
      await B.page.goto(base + '/ui/#/usage');
      await B.page.locator('[data-testid=total-cost]').waitFor();
      assert(close(Number(await B.page.locator('[data-testid=total-cost]').getAttribute('data-value')), other.body.costUsd), 'the other organisation\'s own total');
      assert(await B.page.locator('[data-testid=by-user] tr[data-key=ana]').count() === 0, 'no user of the first organisation');
      // The other organisation ran nothing: its page is empty while the first one's is not.
      const mine = await call(adminKey, 'GET', '/admin/usage');
      assert(mine.body.calls > 0 && other.body.calls === 0, `calls: first ${mine.body.calls}, other ${other.body.calls}`);
      await B.page.locator('[data-testid=empty]', { hasText: 'No LLM calls' }).waitFor();
      await shot(B.page, '33-usage-other-org');
    } finally {
      setCurrent(page);
      await B.ctx.close();
    }
  });
}
