// Scenarios of the chat view (issue 34): Markdown streamed into the view, a follow-up in the
// same session, an approval answered with the view's own Allow button, a steer while a run
// runs, and Stop. The view is a webview: its page sits in two nested iframes.
import fs from 'node:fs';
import path from 'node:path';
import { step, t, waitFor } from './harness.mjs';
import { openFile, palette, pickQuickItem } from './workbench.mjs';

/** The chat view's page (the webview's outer iframe, then its active inner frame). */
function chat(page) {
  return page.frameLocator('iframe.webview.ready').first().frameLocator('iframe#active-frame');
}

const logText = async (page) => chat(page).locator('#log').innerText();

async function send(page, text) {
  const input = chat(page).locator('textarea#input');
  await input.click();
  await input.fill(text);
  await input.press('Enter');
}

async function waitInLog(page, what, predicate, ms = 60_000) {
  return waitFor(what, async () => predicate(await logText(page)), t(ms));
}

/** The Sessions… button, then "New session" in the quick pick. */
async function newChatSession(page) {
  await chat(page).locator('button#sessions').click();
  await pickQuickItem(page, 'New session');
  await waitFor('an empty conversation', async () => (await logText(page)).trim() === '', t(20_000));
}

/** "Agent: Open Chat"; a prompt whose answer has **bold** and a code block, then a follow-up. */
export async function chatMarkdownAndFollowUp({ page, tasks }) {
  const r = {};
  await step('Agent: Open Chat', () => palette(page, 'Agent: Open Chat'));
  const input = chat(page).locator('textarea#input');
  await step('the chat view', () => input.waitFor({ state: 'visible', timeout: t(60_000) }));
  r.placeholder = await input.getAttribute('placeholder');
  r.containerTitle = await page.locator('.part.sidebar .composite.title').first().innerText().catch(() => '');
  await step('send the first prompt', () => send(page, tasks.chatFirst));
  await step('the bold text in the view', () =>
    chat(page).locator('.text strong', { hasText: tasks.chatBold }).waitFor({ state: 'visible', timeout: t(60_000) }));
  await step('the code block', () =>
    chat(page).locator('.code pre code').first().waitFor({ state: 'visible', timeout: t(30_000) }));
  r.codeText = await chat(page).locator('.code pre code').first().innerText();
  r.copyButtons = await chat(page).locator('.code button.copy').count();
  await waitInLog(page, 'the first run to stop', (text) => text.includes('■ done'));
  r.rawHtmlShown = await chat(page).locator('.text script, .text img[src^="http"], .text a[href^="command:"]').count();
  await step('send the follow-up', () => send(page, tasks.chatSecond));
  await waitInLog(page, 'the follow-up answer', (text) => text.includes(tasks.chatSecondAnswer));
  await waitInLog(page, 'two stops', (text) => (text.match(/■ done/g) ?? []).length === 2);
  r.prompts = await chat(page).locator('.user .prompt').allInnerTexts();
  r.log = await logText(page);
  return r;
}

/** An edit's approval answered with the view's Allow button; the edit lands. */
export async function chatApproval({ page, dirs, tasks }) {
  const r = {};
  await step('open calc.py', () => openFile(page, 'calc.py'));
  await palette(page, 'Agent: Open Chat');
  await newChatSession(page);
  await step('send the edit prompt', () => send(page, tasks.chatEdit));
  const approval = chat(page).locator('.approval').filter({ has: chat(page).locator('button') }).first();
  await step('the approval in the view', () => approval.waitFor({ state: 'visible', timeout: t(60_000) }));
  r.approvalText = await approval.locator('.approval-text').innerText();
  r.buttons = await approval.locator('.approval-buttons button').allInnerTexts();
  r.toastsWhileVisible = await page.locator('.notifications-toasts .notification-toast', { hasText: 'edit_file' }).count();
  await page.screenshot({ path: path.join(dirs.shots, 'chat.png') });
  await step('click Allow', () => approval.getByRole('button', { name: 'Allow', exact: true }).click());
  await waitInLog(page, 'the run to stop', (text) => text.includes('■ done'));
  r.fileOnDisk = await waitFor('the edit on disk', () => {
    const text = fs.readFileSync(path.join(dirs.workspace, 'calc.py'), 'utf8');
    return text.includes('return a + b') ? text : undefined;
  }, t(30_000));
  r.toolEntries = await chat(page).locator('details.tool').allInnerTexts();
  r.log = await logText(page);
  await page.screenshot({ path: path.join(dirs.shots, 'chat.png') });
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
  return r;
}
