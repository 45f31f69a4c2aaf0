/**
 * Markdown for the chat view, rendered in the extension host with markdown-it: no raw HTML
 * (`html: false`), links kept only for http(s) and mailto (the webview hands every click back
 * to the extension, which asks before opening), and each code block with a Copy button.
 */
import MarkdownIt from 'markdown-it';

const md = new MarkdownIt({ html: false, linkify: true, breaks: false });

/** markdown-it already refuses `javascript:`, `vbscript:`, `file:` and most `data:`; the chat
 * also refuses `command:` and every other scheme an editor could act on. */
md.validateLink = (url: string): boolean => {
  const trimmed = url.trim().toLowerCase();
  return /^(https?:|mailto:)/.test(trimmed) || /^#/.test(trimmed);
};

const defaultFence = md.renderer.rules.fence!;
md.renderer.rules.fence = (tokens, idx, options, env, self) => {
  const block = defaultFence(tokens, idx, options, env, self);
  return `<div class="code"><button class="copy" type="button" title="Copy the code">Copy</button>${block}</div>`;
};

export function renderMarkdown(text: string): string {
  return md.render(text);
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
