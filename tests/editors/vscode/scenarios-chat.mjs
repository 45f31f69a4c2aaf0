// Scenarios of the chat view (issue 34): Markdown streamed into the view, a follow-up in the
// same session, an approval answered with the view's own Allow button, a steer while a run
// runs, and Stop. The view is a webview: its page sits in two nested iframes.
import fs from 'node:fs';
import path from 'node:path';
import { step, t, waitFor } from './harness.mjs';
import { answerInputBox, chooseRow, clickToastButton, openFile, palette, pickQuickItem, toastWithButton } from './workbench.mjs';

/** The chat view's page (the webview's outer iframe, then its active inner frame). */
function chat(page) {
  return page.frameLocator('iframe.webview.ready').first().frameLocator('iframe#active-frame');
}

const logText = async (page) => chat(page).locator('#log').innerText();

async function send(page, text) {
  const input = chat(page).locator('textarea#input');
  // focus, not click: a click first waits for two stable frames (about 2 s here, see
  // AGENT_LSP_CHROMIUM_ARGS in run-test.mjs); the message is typed into the input all the same
  await input.focus();
  await input.fill(text);
  await input.press('Enter');
}

async function waitInLog(page, what, predicate, ms = 60_000) {
  return waitFor(what, async () => predicate(await logText(page)), t(ms));
}

/** "Agent: Open Chat", then wait until the view's input has the focus: the command focuses it
 * a moment later, which would close a quick pick opened in between. */
async function openChat(page) {
  await palette(page, 'Agent: Open Chat');
  const input = chat(page).locator('textarea#input');
  await input.waitFor({ state: 'visible', timeout: t(60_000) });
  await waitFor('the chat input focused', () =>
    input.evaluate((node) => document.activeElement === node && document.hasFocus()), t(30_000));
}

/** The Sessions… button, then "New session" in the quick pick. */
async function newChatSession(page) {
  await step('Sessions…', () => chat(page).locator('button#sessions').click());
  // the first row, active in the pick: Enter takes it (a click first waits for two stable
  // frames, and headless Chromium draws about one a second here)
  const row = page.locator('.quick-input-widget .quick-input-list .monaco-list-row.focused', { hasText: 'New session' });
  await step('"New session" picked', async () => {
    await row.first().waitFor({ state: 'visible', timeout: t(30_000) });
    await page.keyboard.press('Enter');
  });
  await step('an empty conversation', () => waitFor('an empty conversation', async () => (await logText(page)).trim() === '', t(20_000)));
}

/** "Agent: Open Chat"; a prompt whose answer has **bold** and a code block, then a follow-up. */
export async function chatMarkdownAndFollowUp({ page, tasks }) {
  const r = {};
  await step('Agent: Open Chat', () => openChat(page));
  const input = chat(page).locator('textarea#input');
  await step('the chat view', () => input.waitFor({ state: 'visible', timeout: t(60_000) }));
  r.placeholder = await input.getAttribute('placeholder');
  r.containerTitle = await page.locator('.part.sidebar .composite.title').first().innerText().catch(() => '');
  await step('send the first prompt', () => send(page, tasks.chatFirst));
  await step('the bold text in the view', () =>
    chat(page).locator('.text strong', { hasText: tasks.chatBold }).waitFor({ state: 'visible', timeout: t(60_000) }));
  await step('the code block', () =>
    chat(page).locator('.code pre code').first().waitFor({ state: 'visible', timeout: t(30_000) }));
  await waitInLog(page, 'the first run to stop', (text) => text.includes('■ done'));
  r.codeText = await chat(page).locator('.code pre code').first().innerText();
  r.copyButtons = await chat(page).locator('.code button.copy').count();
  await chat(page).locator('.text a[href="https://example.com/docs"]').click();
  const dialog = page.locator('.monaco-dialog-box');
  await step('the link confirmation', () => dialog.waitFor({ state: 'visible', timeout: t(30_000) }));
  r.linkDialog = await dialog.innerText();
  await dialog.getByRole('button', { name: 'Cancel', exact: true }).click();
  await dialog.waitFor({ state: 'hidden', timeout: t(30_000) });
  r.rawHtmlShown = await chat(page).locator('.text script, .text img[src^="http"], .text a[href^="command:"]').count();
  await step('send the follow-up', () => send(page, tasks.chatSecond));
  await waitInLog(page, 'the follow-up answer', (text) => text.includes(tasks.chatSecondAnswer));
  await waitInLog(page, 'two stops', (text) => (text.match(/■ done/g) ?? []).length === 2);
  r.prompts = await chat(page).locator('.user .prompt').allInnerTexts();
  r.log = await logText(page);
  r.meter = await chat(page).locator('#meter').innerText();
  // the session picker lists this session, marked current
  await chat(page).locator('button#sessions').click();
  const row = page.locator('.quick-input-widget .quick-input-list .monaco-list-row', { hasText: tasks.chatFirst.slice(0, 20) });
  await step('the session in the picker', () => row.first().waitFor({ state: 'visible', timeout: t(30_000) }));
  r.sessionsPick = (await page.locator('.quick-input-widget .quick-input-list').innerText()).replace(/\u00a0/g, ' ');
  await page.keyboard.press('Escape');
  return r;
}

/** An edit's approval answered with the view's Allow button; the edit lands. */
export async function chatApproval({ page, dirs, tasks }) {
  const r = {};
  await step('open calc.py', () => openFile(page, 'calc.py'));
  await openChat(page);
  await step('send the edit prompt', () => send(page, tasks.chatEdit));
  const approval = chat(page).locator('.approval').filter({ has: chat(page).locator('button') }).first();
  await step('the approval in the view', () => approval.waitFor({ state: 'visible', timeout: t(60_000) }));
  r.approvalText = await approval.locator('.approval-text').innerText();
  r.buttons = await approval.locator('.approval-buttons button').allInnerTexts();
  r.toastsWhileVisible = await page.locator('.notifications-toasts .notification-toast', { hasText: 'edit_file' }).count();
  await page.screenshot({ path: path.join(dirs.shots, 'chat.png') });
  const stopsBefore = ((await logText(page)).match(/■ done/g) ?? []).length;
  await step('click Allow', () => approval.getByRole('button', { name: 'Allow', exact: true }).click());
  await waitInLog(page, 'the run to stop', (text) => (text.match(/■ done/g) ?? []).length > stopsBefore);
  r.fileOnDisk = await waitFor('the edit on disk', () => {
    const text = fs.readFileSync(path.join(dirs.workspace, 'calc.py'), 'utf8');
    return text.includes('return a + b') ? text : undefined;
  }, t(30_000));
  r.toolEntries = await chat(page).locator('details.tool').allInnerTexts();
  r.log = await logText(page);
  return r;
}

/** A message typed while the run runs steers it: `» text` in the view, in the model's next request. */
export async function chatSteer({ page, tasks }) {
  const r = {};
  await newChatSession(page);
  await step('send the slow prompt', () => send(page, tasks.chatSlow));
  await waitInLog(page, 'the slow answer streaming', (text) => text.includes(tasks.chatSlowStart), 60_000);
  r.stopEnabled = await chat(page).locator('button#stop').isEnabled();
  await step('steer', () => send(page, tasks.chatSteerText));
  await waitInLog(page, 'the steer line', (text) => text.includes(`» ${tasks.chatSteerText}`));
  await waitInLog(page, 'the steered answer', (text) => text.includes(tasks.chatSteered) && text.includes('■ done'), 90_000);
  r.log = await logText(page);
  return r;
}

/** Stop (the button, then Escape in the input for a second run): the view says cancelled. */
export async function chatStop({ page, tasks }) {
  const r = {};
  await newChatSession(page);
  await step('send the prompt that never answers', () => send(page, tasks.chatHang));
  const stop = chat(page).locator('button#stop');
  await waitFor('Stop to be enabled', () => stop.isEnabled(), t(30_000));
  await step('click Stop', () => stop.click());
  await waitInLog(page, '"cancelled" in the view', (text) => text.includes('■ cancelled'), 30_000);
  await step('send it again', () => send(page, tasks.chatHang));
  await waitFor('Stop to be enabled again', () => stop.isEnabled(), t(30_000));
  await step('Escape in the input', () => chat(page).locator('textarea#input').press('Escape'));
  await waitInLog(page, 'a second "cancelled"', (text) => (text.match(/■ cancelled/g) ?? []).length === 2, 30_000);
  r.log = await logText(page);
  // idle, Escape in the input hands the focus back to the editor
  await waitFor('Stop disabled (idle)', async () => !(await stop.isEnabled()), t(30_000));
  await chat(page).locator('textarea#input').press('Escape');
  r.editorFocused = await waitFor('the editor focused', async () =>
    (await page.locator('.editor-group-container .monaco-editor.focused').count()) > 0, t(15_000)).catch(() => false);
  return r;
}

/** "Edit and resend" on the second prompt: a fork before it, the prompt back in the input;
 * the edited prompt runs in the fork; the session picker then shows the old session again,
 * rendered from agentLsp.history. */
export async function chatForkAndResume({ page, tasks }) {
  const r = {};
  await openChat(page);
  await chat(page).locator('button#sessions').click();
  await pickQuickItem(page, tasks.chatFirst.slice(0, 20));
  await waitInLog(page, 'the resumed session rendered from its history',
    (text) => text.includes(tasks.chatSecondAnswer) && text.includes(tasks.chatEdit));
  r.resumedPrompts = await chat(page).locator('.user .prompt').allInnerTexts();
  r.resumedLog = await logText(page);
  const second = chat(page).locator('.user', { hasText: tasks.chatSecond });
  await step('Edit and resend', () => second.getByRole('button', { name: 'Edit and resend' }).click());
  const input = chat(page).locator('textarea#input');
  await waitFor('the prompt back in the input', async () => (await input.inputValue()) === tasks.chatSecond, t(30_000));
  r.forkPrompts = await chat(page).locator('.user .prompt').allInnerTexts();
  await input.fill(tasks.chatForked);
  await input.press('Enter');
  await waitInLog(page, 'the forked answer', (text) => text.includes(tasks.chatForkedAnswer) && text.includes('■ done'));
  r.afterPrompts = await chat(page).locator('.user .prompt').allInnerTexts();
  return r;
}

/** Queue ticked: two prompts queued while a run runs, one removed; the other runs next. */
export async function chatQueue({ page, tasks }) {
  const r = {};
  await newChatSession(page);
  await step('send the slow prompt', () => send(page, tasks.chatQueueSlow));
  await waitInLog(page, 'the slow answer streaming', (text) => text.includes(tasks.chatSlowStart), 60_000);
  await chat(page).locator('#queue-mode').check();
  await send(page, tasks.chatQueued1);
  await send(page, tasks.chatQueued2);
  const rows = chat(page).locator('#queue .queued');
  await waitFor('two queued prompts', async () => (await rows.count()) === 2, t(30_000));
  r.queuedTexts = await rows.allInnerTexts();
  await rows.filter({ hasText: tasks.chatQueued2 }).getByRole('button', { name: 'Remove' }).click();
  await waitFor('one queued prompt', async () => (await rows.count()) === 1, t(30_000));
  await waitInLog(page, 'the queued prompt answered',
    (text) => text.includes(tasks.chatQueuedAnswer) && (text.match(/■ done/g) ?? []).length === 2, 90_000);
  r.prompts = await chat(page).locator('.user .prompt').allInnerTexts();
  r.queueAfter = await rows.count();
  await chat(page).locator('#queue-mode').uncheck();
  return r;
}

/** The chat hidden (Explorer in front): a palette run's approval comes as a notification with
 * "Open chat"; that button moves the question into the view, where Deny with a reason answers. */
export async function chatHiddenApproval({ page, tasks }) {
  const r = {};
  await palette(page, 'View: Show Explorer');
  await palette(page, 'Agent: New Session');
  await palette(page, 'Agent: Run Task…');
  await answerInputBox(page, tasks.chatHidden);
  const note = await step('the approval notification', () => toastWithButton(page, 'edit_file', 'Open chat', 60_000));
  r.toastButtons = await note.locator('.monaco-button').allInnerTexts();
  await clickToastButton(note, 'Open chat');
  const approval = chat(page).locator('.approval').filter({ has: chat(page).locator('.approval-buttons') }).first();
  await step('the approval in the view', () => approval.waitFor({ state: 'visible', timeout: t(30_000) }));
  // keyboard only, from the input: Shift+Tab reaches the reason, then Show diff, then Deny
  const input = chat(page).locator('textarea#input');
  await input.focus();
  await input.press('Shift+Tab');
  await page.keyboard.type(tasks.chatHiddenReason);
  await page.keyboard.press('Shift+Tab');
  await page.keyboard.press('Shift+Tab');
  r.focusedButton = await approval.locator('button:focus').innerText().catch(() => '');
  await page.keyboard.press('Enter');
  await waitFor('the approval answered', async () => (await approval.count()) === 0, t(30_000));
  r.toastsAfter = await page.locator('.notifications-toasts .notification-toast', { hasText: 'edit_file' }).count();
  return r;
}

/** benchmarks/chat_view.py: a long fast answer streamed into the view; how busy the view's
 * page was (the lateness of a 10 ms timer, summed) and whether every word arrived. */
export async function chatBench({ page, tasks }) {
  const r = {};
  await openChat(page);
  const body = chat(page).locator('body');
  await body.waitFor({ state: 'attached', timeout: t(60_000) });
  await body.evaluate(() => {
    const probe = { late: 0, start: performance.now(), stop: 0 };
    let last = performance.now();
    const tick = () => {
      const now = performance.now();
      probe.late += Math.max(0, now - last - 10);
      last = now;
      if (!probe.stop) setTimeout(tick, 10);
    };
    setTimeout(tick, 10);
    window.agentLspProbe = probe;
  });
  await send(page, tasks.chatBench);
  const started = Date.now();
  await waitInLog(page, 'the long answer to finish', (text) => text.includes('■ done'), tasks.chatBenchSeconds * 1000 * 3 + 60_000);
  r.wallMs = Date.now() - started;
  r.probe = await body.evaluate(() => {
    const probe = window.agentLspProbe;
    probe.stop = performance.now();
    return { lateMs: probe.late, elapsedMs: probe.stop - probe.start };
  });
  const text = await logText(page);
  r.words = (text.match(/\bw\d+\b/g) ?? []).length;
  r.lastWord = (text.match(/\bw\d+\b/g) ?? []).pop();
  return r;
}

/** Attachments: a selection ("Agent: Add Selection to Chat"), a file ("@", quick pick) and a
 * pasted image go with the next message. */
export async function chatAttach({ page, tasks }) {
  const r = {};
  await openFile(page, 'calc.py');
  await page.locator('.editor-group-container .monaco-editor .view-lines').first().click();
  await page.keyboard.press('Control+Home');
  await page.keyboard.press('Shift+ArrowDown');
  await page.keyboard.press('Shift+ArrowDown');
  await palette(page, 'Agent: Add Selection to Chat');
  const chips = chat(page).locator('#attachments .chip');
  await waitFor('the selection chip', async () => (await chips.count()) === 1, t(30_000));
  await newChatSession(page);
  const input = chat(page).locator('textarea#input');
  await input.click();
  await input.pressSequentially('@');
  await step('the file pick', () => pickQuickItem(page, 'README.md'));
  await waitFor('two chips', async () => (await chips.count()) === 2, t(30_000));
  await input.evaluate((node) => {
    // a 1x1 PNG pasted into the input
    const png = Uint8Array.from(atob('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=='), (c) => c.charCodeAt(0));
    const data = new DataTransfer();
    data.items.add(new File([png], 'dot.png', { type: 'image/png' }));
    node.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));
  });
  await waitFor('three chips', async () => (await chips.count()) === 3, t(30_000));
  r.chips = await chips.allInnerTexts();
  await send(page, tasks.chatAttach);
  await waitInLog(page, 'the answer', (text) => text.includes('■ done'));
  r.chipsAfter = await chips.count();
  return r;
}

/** "Rewind to here" on the edit prompt of the first session (after a confirmation): calc.py is
 * back as before it, and the view, re-read from agentLsp.history, no longer lists that run. */
export async function chatRewind({ page, dirs, tasks }) {
  const r = {};
  await openChat(page);
  await chat(page).locator('button#sessions').click();
  // the first session, not its fork (titled "… (fork)")
  const rows = page.locator('.quick-input-widget .quick-input-list .monaco-list-row', { hasText: tasks.chatFirst.slice(0, 20) });
  await rows.first().waitFor({ state: 'visible', timeout: t(30_000) });
  await chooseRow(page, rows.filter({ hasNotText: 'fork' }).first());
  const edit = chat(page).locator('.user', { hasText: tasks.chatEdit });
  await step('the session with the edit prompt', () => edit.waitFor({ state: 'visible', timeout: t(30_000) }));
  await edit.getByRole('button', { name: 'Rewind to here' }).click();
  const dialog = page.locator('.monaco-dialog-box');
  await step('the confirmation', () => dialog.waitFor({ state: 'visible', timeout: t(30_000) }));
  r.dialogText = await dialog.innerText();
  await dialog.getByRole('button', { name: 'Rewind', exact: true }).click();
  r.fileOnDisk = await waitFor('calc.py back on disk', () => {
    const text = fs.readFileSync(path.join(dirs.workspace, 'calc.py'), 'utf8');
    return text.includes('return a - b') ? text : undefined;
  }, t(30_000));
  await waitFor('the rewound run gone from the view', async () => (await edit.count()) === 0, t(30_000));
  r.prompts = await chat(page).locator('.user .prompt').allInnerTexts();
  return r;
}

/** Decision 74: Stop with two prompts queued removes both (newest first), then cancels the run. */
export async function chatStopQueued({ page, tasks }) {
  const r = {};
  await newChatSession(page);
  await step('send the prompt that never answers (queue)', () => send(page, tasks.chatStopQueued));
  const stop = chat(page).locator('button#stop');
  await waitFor('Stop enabled', () => stop.isEnabled(), t(30_000));
  await chat(page).locator('#queue-mode').check();
  await send(page, 'queued A');
  await send(page, 'queued B');
  const rows = chat(page).locator('#queue .queued');
  await step('two queued prompts', () => waitFor('two queued prompts', async () => (await rows.count()) === 2, t(30_000)));
  await step('click Stop (queue)', () => stop.click());
  await step('cancelled (queue)', () => waitInLog(page, '"cancelled"', (text) => text.includes('■ cancelled'), 30_000));
  await waitFor('no queued prompt', async () => (await rows.count()) === 0, t(30_000));
  r.prompts = await chat(page).locator('.user .prompt').allInnerTexts();
  await chat(page).locator('#queue-mode').uncheck();
  return r;
}

/** A newer server's stream (Decision 90): an unknown kind and report fields draw nothing. */
export async function chatUnknownKinds({ page, tasks }) {
  await newChatSession(page);
  await send(page, tasks.chatKinds);
  await waitInLog(page, 'the run to stop', (text) => text.includes('■ done'));
  return { log: await logText(page) };
}

/** Issue 35: an edit of three hunks shown inline in the approval card; hunk 2 rejected with the
 * keyboard (its toggle, Enter); hunk 3 rejected in the diff editor shows in the card and is kept
 * again there; then Allow: hunks 1 and 3 land, the model hears of hunk 2. */
export async function chatHunks({ page, dirs, tasks }) {
  const r = {};
  const file = path.join(dirs.workspace, 'chathunks.txt');
  fs.writeFileSync(file, tasks.chatHunksBefore);
  await openChat(page);
  await newChatSession(page);
  await step('send the three-hunk edit prompt', () => send(page, tasks.chatHunks));
  const approval = chat(page).locator('.approval').filter({ has: chat(page).locator('.approval-buttons') }).first();
  await step('the approval with its hunks', () =>
    approval.locator('.hunk').nth(2).waitFor({ state: 'visible', timeout: t(60_000) }));
  r.headers = await approval.locator('.hunk-header').allInnerTexts();
  r.added = await approval.locator('.hunk-lines .add').allInnerTexts();
  r.removed = await approval.locator('.hunk-lines .del').allInnerTexts();
  r.addedBackground = await approval.locator('.hunk-lines .add').first().evaluate((n) => getComputedStyle(n).backgroundColor);
  r.toggles = await approval.locator('button.hunk-toggle').allInnerTexts();
  await approval.locator('input.reason').fill('a draft reason');
  const toggle = approval.getByRole('button', { name: 'Reject hunk 2 of 3', exact: true });
  await toggle.focus();
  await page.keyboard.press('Enter');
  const keep = approval.getByRole('button', { name: 'Keep hunk 2 of 3', exact: true });
  await step('hunk 2 rejected', () => keep.waitFor({ state: 'visible', timeout: t(30_000) }));
  r.focusStays = await keep.evaluate((node) => document.activeElement === node);
  r.reasonKept = await approval.locator('input.reason').inputValue();
  r.states = await approval.locator('.hunk-state').allInnerTexts();
  r.summary = await approval.locator('.hunk-summary').innerText();
  // the diff editor's title action rejects hunk 3: the card shows it (one choice, two places);
  // Keep in the card then keeps it for Allow too
  const side = page.locator('.monaco-diff-editor .editor.modified .view-lines').first();
  await step('the proposed side of the diff', () => side.waitFor({ state: 'visible', timeout: t(30_000) }));
  await side.click();
  await page.keyboard.press('Control+g');
  await page.keyboard.type('56'); // "line 56", in the third hunk
  await page.keyboard.press('Enter');
  await step('Agent: Reject or Keep the Hunk at the Cursor', () => palette(page, 'Agent: Reject or Keep the Hunk at the Cursor'));
  const keep3 = approval.getByRole('button', { name: 'Keep hunk 3 of 3', exact: true });
  await step('hunk 3 rejected in the card', () => keep3.waitFor({ state: 'visible', timeout: t(30_000) }));
  r.statesAfterDiff = await approval.locator('.hunk-state').allInnerTexts();
  await page.screenshot({ path: path.join(dirs.shots, 'chat-hunks.png') });
  await keep3.click();
  await step('hunk 3 kept again', () => approval.getByRole('button', { name: 'Reject hunk 3 of 3', exact: true })
    .waitFor({ state: 'visible', timeout: t(30_000) }));
  const stopsBefore = ((await logText(page)).match(/■ done/g) ?? []).length;
  await step('click Allow', () => approval.getByRole('button', { name: 'Allow', exact: true }).click());
  await waitInLog(page, 'the run to stop', (text) => (text.match(/■ done/g) ?? []).length > stopsBefore);
  r.fileAfter = await waitFor('the kept hunks on disk', () => {
    const text = fs.readFileSync(file, 'utf8');
    return text.includes('LINE FIVE') ? text : undefined;
  }, t(30_000));
  const settled = chat(page).locator('.approval', { hasText: 'chathunks.txt' }).last();
  r.settledStates = await settled.locator('.hunk-state').allInnerTexts();
  r.settledToggles = await settled.locator('button.hunk-toggle').count();
  return r;
}
