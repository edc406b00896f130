// The web page of `1bit lemonade` in headless Chromium (Debian's), driven by playwright-core: it
// lists the catalog, loads a model with its button, and streams a chat answer. The screenshot is
// kept in SCREENSHOT_DIR.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { startLemonade } from './lemon.mjs';

const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const shots = process.env.SCREENSHOT_DIR || '.';

test('load a model and stream an answer from the page', async () => {
  const server = await startLemonade();
  // No network beyond loopback here: the flags keep Chromium from trying.
  const browser = await chromium.launch({
    executablePath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(server.base + '/');
    const row = page.locator('#catalog tr', { hasText: '1bit-tiny' }).first();
    await row.getByRole('button', { name: 'Load' }).click();
    await page.locator('#loaded tr', { hasText: '1bit-tiny' }).waitFor({ timeout: 60000 });
    assert.deepEqual(await server.loaded(), ['1bit-tiny']);

    await page.selectOption('#model', '1bit-tiny');
    await page.fill('#prompt', 'define apple');
    // The temperature left empty: the engine samples with its default, so only that the answer
    // completes is sure.
    await page.click('#send');
    await page.locator('#answer[data-done="1"]').waitFor({ timeout: 60000 });
    assert.match(await page.textContent('#chatstatus'), /^done, \d+ chunks$/);
    // Greedy, so the trained model's answer is the same on every run.
    await page.fill('#temperature', '0');
    await page.click('#send');
    await page.locator('#answer[data-done="1"]').waitFor({ timeout: 60000 });
    const answer = await page.textContent('#answer');
    assert.match(answer, /apple \(noun\)/);
    const status = await page.textContent('#chatstatus');
    const chunks = Number(status.match(/(\d+) chunks/)[1]);
    assert.ok(chunks > 5, `streamed in only ${chunks} chunks`);
    mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: join(shots, 'lemonade-page.png'), fullPage: true });
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
    await server.stop();
  }
});
