// The operator's first hour (docs/operations.md), as a new operator would follow it, in one
// browser test run by run.mjs: the operator creates an organisation and its first admin key
// (API, as `yard orgs` does); its admin signs in, connects an OpenAI-compatible provider
// (sim-llm) with a key through the Providers page, routes to it, sets a limit and a price;
// a job runs and the usage page shows its cost at that price. No SQL anywhere.

export async function journeyTests(h) {
  const { test, page: main, base, call, browserContext, signIn, shot, assert, sleep, Skip, setCurrent } = h;
  const operatorKey = process.env.SWITCHYARD_UI_OPERATOR_KEY;
  const simURL = process.env.SWITCHYARD_UI_SIM_URL;

  await test('an operator\'s first hour: organisation, provider with a key, limit, price, a job, its cost on the usage page', async () => {
    if (!operatorKey || !simURL) throw new Skip('SWITCHYARD_UI_OPERATOR_KEY and SWITCHYARD_UI_SIM_URL are needed');
    const slug = 'journey-' + Math.random().toString(36).slice(2, 8);

    // The operator: an organisation and its first admin key (docs/operations.md, "An operator's first steps").
    const org = await call(operatorKey, 'POST', '/operator/orgs', { slug, name: 'Journey Ltd', jurisdiction: 'eu' });
    assert(org.status === 201, 'create org: ' + JSON.stringify(org.body));
    const ak = await call(operatorKey, 'POST', `/operator/orgs/${slug}/admin-keys`, {});
    assert(ak.status === 201 && ak.body.key, 'admin key: ' + JSON.stringify(ak.body));
    const adminKey = ak.body.key;
    const seen = await call(operatorKey, 'GET', '/dispatch');
    assert(seen.status === 403, 'the operator key reads no organisation\'s runs: ' + seen.status);

    const B = await browserContext();
    setCurrent(B.page);
    const page = B.page;
    try {
      await signIn(page, adminKey);

      // The admin connects a provider with its key (docs/operations.md, "Connect a provider").
      await page.goto(base + '/ui/#/providers');
      const form = page.locator('[data-testid=new-provider]');
      await form.waitFor();
      await form.locator('input[name=name]').fill('journey-sim');
      await form.locator('select[name=kind]').selectOption('openai_compatible');
      await form.locator('input[name=baseUrl]').fill(simURL.replace(/\/$/, '') + '/v1');
      await form.locator('select[name=jurisdiction]').selectOption('eu');
      await form.locator('input[name=model]').fill('sim-fast');
      await form.locator('[data-testid=add-provider]').click();
      const card = page.locator('article[data-provider=journey-sim]');
      await card.waitFor();
      const secret = 'sk-journey-' + Math.random().toString(36).slice(2, 10) + '-7315';
      await card.locator('input[name=apiKey]').fill(secret);
      await card.locator('[data-testid=set-key]').click();
      await card.locator('[data-testid=key]', { hasText: '…7315' }).waitFor();
      assert(!(await page.content()).includes(secret), 'the key is not in the page once set');

      const routing = page.locator('[data-testid=routing]');
      await routing.locator('tr[data-hint=default] select').selectOption('journey-sim');
      await routing.locator('[data-testid=save-routing]').click();
      await routing.locator('[data-testid=routing-saved]').waitFor();

      await card.locator('[data-testid=test]').click();
      const result = card.locator('[data-testid=test-result]');
      await result.waitFor({ timeout: 40000 });
      assert((await result.getAttribute('data-ok')) === 'true', 'test connection: ' + (await result.textContent()));

      const limits = page.locator('[data-testid=limits]');
      await limits.locator('input[name=provider]').fill('journey-sim');
      await limits.locator('input[name=model]').fill('sim-fast');
      await limits.locator('input[name=rpm]').fill('120');
      await limits.locator('input[name=tpm]').fill('60000');
      await limits.locator('[data-testid=save-limit]').click();
      await limits.locator('tr[data-limit="journey-sim/sim-fast"]', { hasText: '60000' }).waitFor();

      // A price of its own, far above the platform's default for sim-fast, so the cost shows whose price billed.
      const prices = page.locator('[data-testid=prices]');
      await prices.locator('select[name=providerKind]').selectOption('openai_compatible');
      await prices.locator('input[name=model]').fill('sim-fast');
      await prices.locator('input[name=input]').fill('40');
      await prices.locator('input[name=output]').fill('90');
      await prices.locator('[data-testid=save-price]').click();
      await prices.locator('tr[data-price="openai_compatible/sim-fast"][data-source=org]').waitFor();
      await shot(page, '50-journey-providers');

      // A skill and a job (the organisation starts with no skills: docs/operations.md).
      const sk = await call(adminKey, 'PUT', '/skills/journey_llm',
        { job_type: 'journey_llm', execution_type: 'llm_only', enabled: true, max_tokens: 64 });
      assert(sk.status === 201, 'skill: ' + JSON.stringify(sk.body));
      const d = await call(adminKey, 'POST', '/dispatch', { job_type: 'journey_llm', payload: { prompt: 'Hello from a new organisation' } });
      assert(d.status === 202, 'dispatch: ' + JSON.stringify(d.body));
      let run;
      for (const deadline = Date.now() + 60000; Date.now() < deadline; await sleep(200)) {
        run = (await call(adminKey, 'GET', '/dispatch/' + d.body.jobId)).body;
        if (['completed', 'failed'].includes(run.status)) break;
      }
      assert(run.status === 'completed', 'the job completed: ' + JSON.stringify(run));
      const bill = run.billing;
      const want = (bill.tokensIn * 40 + bill.tokensOut * 90) / 1e6;
      assert(want > 0 && Math.abs(bill.costUsd - want) < 1e-9, `the run cost ${bill.costUsd}, at the organisation's price ${want}`);

      // The usage page shows it once the router's ledger has it: the skill's row at the job's
      // cost, the total beside it (the Test connection probe is a call of its own).
      let shown = 0;
      for (const deadline = Date.now() + 30000; Date.now() < deadline; await sleep(500)) {
        await page.goto(base + '/ui/#/usage');
        await page.locator('[data-testid=total-cost]').waitFor();
        const row = page.locator('[data-testid=top-skills] tr[data-key=journey_llm] [data-testid=cost]');
        if (await row.count()) shown = Number(await row.getAttribute('data-value'));
        if (Math.abs(shown - want) < 1e-9) break;
      }
      assert(Math.abs(shown - want) < 1e-9, `the usage page shows ${shown} for journey_llm, the job cost ${want}`);
      const total = Number(await page.locator('[data-testid=total-cost]').getAttribute('data-value'));
      assert(total >= want, `the total ${total} holds the job's cost`);
      await shot(page, '51-journey-usage');
    } catch (e) {
      await shot(page, 'failed-journey').catch(() => {});
      throw e;
    } finally {
      setCurrent(main);
      await B.ctx.close();
    }
  });
}
