// Browser tests of the Providers page (web/src/pages/providers.js), run by tests/run.mjs with
// its helpers: an admin adds an OpenAI-compatible provider (sim-llm) and enters its key, which
// the page shows afterwards only as its last four characters; Test connection goes through the
// normal path; an unresolvable routing policy is refused naming the rule; a limit and a price.

/** providersTests registers the Providers page's browser tests; h holds run.mjs's helpers. */
export async function providersTests(h) {
  const { test, page, base, adminKey, call, shot, assert, Skip } = h;
  const simURL = process.env.SWITCHYARD_UI_SIM_URL;

  await test('providers: connect a provider with a key, test it, route, limit and price it', async () => {
    if (!simURL) throw new Skip('SWITCHYARD_UI_SIM_URL is not set: no sim-llm to connect');
    const key = 'sk-ui-browser-test-key-8642';
    await page.goto(base + '/ui/#/providers');
    const form = page.locator('[data-testid=new-provider]');
    await form.waitFor();
    await form.locator('input[name=name]').fill('ui-sim');
    await form.locator('select[name=kind]').selectOption('openai_compatible');
    await form.locator('input[name=baseUrl]').fill(simURL.replace(/\/$/, '') + '/v1');
    await form.locator('select[name=jurisdiction]').selectOption('eu');
    await form.locator('input[name=model]').fill('sim-fast');
    await form.locator('[data-testid=add-provider]').click();
    const card = page.locator('article[data-provider=ui-sim]');
    await card.waitFor();
    await card.locator('[data-testid=key]', { hasText: 'no key' }).waitFor();

    await card.locator('input[name=apiKey]').fill(key);
    await card.locator('[data-testid=set-key]').click();
    await card.locator('[data-testid=key]', { hasText: '…8642' }).waitFor();
    assert(!(await page.content()).includes(key), 'the key is not in the page after it was set');
    const api = await call(adminKey, 'GET', '/admin/providers/ui-sim');
    assert(api.body.credential.last4 === '8642' && !JSON.stringify(api.body).includes(key), 'the API shows only the last four');

    await card.locator('[data-testid=test]').click();
    const result = card.locator('[data-testid=test-result]');
    await result.waitFor({ timeout: 40000 });
    assert((await result.getAttribute('data-ok')) === 'true', 'test connection: ' + (await result.textContent()));
    await shot(page, '30-providers');

    // A hint routed to a provider without a model for it is refused, naming the rule.
    const bare = await call(adminKey, 'PUT', '/admin/providers/ui-bare', { kind: 'anthropic' });
    assert(bare.status === 201, 'ui-bare: ' + JSON.stringify(bare.body));
    await page.locator('button.link', { hasText: 'Refresh' }).click();
    const routing = page.locator('[data-testid=routing]');
    await routing.locator('tr[data-hint=fast] select').selectOption('ui-bare');
    await routing.locator('[data-testid=save-routing]').click();
    await routing.locator('[data-testid=field-errors] li[data-field="rules[1].model"]').waitFor();
    const pol = await call(adminKey, 'GET', '/admin/routing');
    assert(!pol.body.rules.some((r) => r.provider === 'ui-bare'), 'the refused policy changed nothing');

    const limits = page.locator('[data-testid=limits]');
    await limits.locator('input[name=provider]').fill('ui-sim');
    await limits.locator('input[name=model]').fill('sim-fast');
    await limits.locator('input[name=rpm]').fill('600');
    await limits.locator('input[name=tpm]').fill('90000');
    await limits.locator('[data-testid=save-limit]').click();
    await limits.locator('tr[data-limit="ui-sim/sim-fast"]', { hasText: '90000' }).waitFor();

    const prices = page.locator('[data-testid=prices]');
    await prices.locator('tr[data-price="openai/gpt-4o-mini"][data-source=default]').waitFor();
    await prices.locator('select[name=providerKind]').selectOption('openai_compatible');
    await prices.locator('input[name=model]').fill('ui-model');
    await prices.locator('input[name=input]').fill('0.2');
    await prices.locator('input[name=output]').fill('0.8');
    await prices.locator('[data-testid=save-price]').click();
    await prices.locator('tr[data-price="openai_compatible/ui-model"][data-source=org]').waitFor();
    await shot(page, '31-providers-limits-prices');
  });
}
