// Playwright helpers for the VS Code workbench (code-server): the palette, quick picks,
// input boxes, notifications, editors, the status bar.
import { t, waitFor } from './harness.mjs';

// Monaco renders spaces as U+00A0.
export const plain = (text) => text.replace(/\u00a0/g, ' ');

// Right after a (multi-root) window loads, the palette sometimes opens and drops what is typed
// (a CI run waited 30 s for a command row that never came, and the same step passed alone):
// close it and type again, three times at most, before failing.
export async function palette(page, title) {
  const input = page.locator('.quick-input-widget input');
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
  for (let attempt = 1; ; attempt++) {
    await page.keyboard.press('F1');
    await input.waitFor({ state: 'visible', timeout: t(30_000) });
    await input.fill(`>${title}`);
    try {
      await row.waitFor({ state: 'visible', timeout: t(attempt < 3 ? 10_000 : 30_000) });
      break;
    } catch (err) {
      if (attempt >= 3) throw err;
      await page.keyboard.press('Escape');
    }
  }
  await page.keyboard.press('Enter');
}

export async function answerInputBox(page, text, titleText) {
  const widget = page.locator('.quick-input-widget', titleText ? { hasText: titleText } : {});
  await widget.waitFor({ state: 'visible', timeout: t(30_000) });
  const input = widget.locator('input');
  await input.fill(text);
  await page.keyboard.press('Enter');
}

/** Waits for a quick pick row holding `hasText`, returns every row's text, picks that row. */
export async function pickQuickItem(page, hasText) {
  const row = page.locator('.quick-input-widget .quick-input-list .monaco-list-row', { hasText }).first();
  await row.waitFor({ state: 'visible', timeout: t(30_000) });
  const rows = (await page.locator('.quick-input-widget .quick-input-list .monaco-list-row').allInnerTexts()).map(plain);
  await chooseRow(page, row);
  return rows;
}

/**
 * Takes a row of the open quick pick as a keyboard user does: the arrow keys until it is the
 * active row, then Enter. (A click first waits for two stable frames, and while a webview is
 * open headless Chromium draws about one a second: a click on a row cost 2-4 s.)
 */
export async function chooseRow(page, row) {
  const index = await row.getAttribute('data-index');
  const active = page.locator(`.quick-input-widget .quick-input-list .monaco-list-row.focused[data-index="${index}"]`);
  for (let i = 0; i < 50 && (await active.count()) === 0; i++) {
    await page.keyboard.press('ArrowDown');
  }
  await active.waitFor({ state: 'visible', timeout: t(10_000) });
  await page.keyboard.press('Enter');
}

export async function openFile(page, name) {
  await page.keyboard.press('Control+P');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout: t(30_000) });
  await input.fill(name);
  // the row Enter opens: the recently opened list shows `name` before the filter applies
  await page.locator('.quick-input-list .monaco-list-row.focused', { hasText: name }).first()
    .waitFor({ state: 'visible', timeout: t(30_000) });
  await page.keyboard.press('Enter');
  await page.locator('.tabs-container .tab.active', { hasText: name.split('/').pop() })
    .waitFor({ state: 'visible', timeout: t(30_000) });
}

export async function editorText(page) {
  return plain(await page.locator('.editor-group-container .monaco-editor .view-lines').first().innerText());
}

/** The text of the right (proposed) side of the diff editor, if one is open. */
export async function diffModifiedText(page) {
  const side = page.locator('.editor-group-container .monaco-diff-editor .editor.modified .view-lines').first();
  return (await side.count()) ? plain(await side.innerText()) : '';
}

export async function outputPanelText(page) {
  return plain(await page.locator('.part.panel .monaco-editor .view-lines').first().innerText());
}

export function toast(page, hasText) {
  return page.locator('.notifications-toasts .notification-toast', { hasText });
}

export function button(page, name) {
  return page.getByRole('button', { name, exact: true });
}

/** A toast holding `text` and a button named `name`; waits for it to show. */
export async function toastWithButton(page, text, name, timeoutMs = 60_000) {
  const found = toast(page, text).filter({ has: button(page, name) }).first();
  await found.waitFor({ state: 'visible', timeout: t(timeoutMs) });
  return found;
}

/**
 * Clicks the button `name` of a toast and waits for the toast to close. A click that lands
 * while the toast is still sliding in can be lost (seen once in CI: "Carry Out Plan" stayed
 * up), so the toast is let settle first and the click is repeated while the toast stays.
 */
export async function clickToastButton(found, name) {
  await settled(found);
  // Pinned to this very toast: a retry must never click the same button of a newer toast.
  const handle = await found.elementHandle();
  for (let attempt = 1; ; attempt += 1) {
    const target = await handle.$(`.monaco-button:text-is("${name}")`);
    if (!target) return; // the toast closed meanwhile
    await target.click({ timeout: t(10_000) }).catch((err) => {
      if (attempt >= 3) throw err;
    });
    try {
      await handle.waitForElementState('hidden', { timeout: t(5_000) });
      return;
    } catch {
      if (attempt >= 3) throw new Error(`the toast's "${name}" button was clicked ${attempt} times and the toast stayed`);
    }
  }
}

export async function clearNotifications(page) {
  await page.keyboard.press('Escape');
  await palette(page, 'Notifications: Clear All Notifications');
}

export async function statusBarTexts(page) {
  return (await page.locator('.part.statusbar .statusbar-item').allInnerTexts()).map(plain);
}

export async function tabLabels(page) {
  return (await page.locator('.tabs-container .tab').allInnerTexts()).map(plain);
}

/** Waits until an element stops moving (a toast slides in) before a screenshot. */
export async function settled(locator) {
  let last = '';
  await waitFor('the element to settle', async () => {
    const box = JSON.stringify(await locator.boundingBox());
    const same = box === last;
    last = box;
    return same;
  }, t(10_000), 150);
}
