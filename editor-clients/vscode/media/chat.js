// The chat view's page: draws the items the extension sends (their HTML is markdown-it's,
// without raw HTML) and sends the user's actions back. It opens nothing itself: links,
// copies and approvals all go through the extension.
(function () {
  const vscode = acquireVsCodeApi();
  const log = document.getElementById('log');
  const input = document.getElementById('input');
  const stopButton = document.getElementById('stop');
  const queueMode = document.getElementById('queue-mode');
  const queueList = document.getElementById('queue');
  const attachmentList = document.getElementById('attachments');
  let running = false;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function button(label, onClick, title) {
    const b = el('button', '', label);
    b.type = 'button';
    if (title) b.title = title;
    b.addEventListener('click', onClick);
    return b;
  }

  function atBottom() {
    return log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  }

  // ---- items ----

  function renderUser(item) {
    const node = el('div', 'item user');
    node.appendChild(el('div', 'prompt', item.text));
    const tools = el('div', 'user-actions');
    tools.appendChild(button('Edit and resend', () => vscode.postMessage({ type: 'fork', runId: item.runId }),
      'Fork the session before this prompt and put the prompt back in the input'));
    tools.appendChild(button('Rewind to here', () => vscode.postMessage({ type: 'rewind', runId: item.runId }),
      'Put the files back as they were before this prompt'));
    node.appendChild(tools);
    return node;
  }

  function renderMarkdown(item) {
    if (item.kind === 'thinking') {
      const details = el('details', 'item thinking');
      details.appendChild(el('summary', '', 'Thinking'));
      const body = el('div', 'markdown');
      body.innerHTML = item.html;
      details.appendChild(body);
      return details;
    }
    const node = el('div', 'item text markdown');
    node.innerHTML = item.html;
    return node;
  }

  function renderTool(item) {
    const details = el('details', 'item tool');
    const state = item.ok === undefined ? 'running' : item.ok ? 'ok' : 'failed';
    details.classList.add(state);
    const summary = el('summary');
    summary.appendChild(el('span', 'tool-name', (item.agent ? `[${item.agent}] ` : '') + item.tool));
    summary.appendChild(el('span', 'tool-state', state));
    details.appendChild(summary);
    if (item.args) details.appendChild(el('pre', 'args', item.args));
    if (item.result !== undefined) details.appendChild(el('pre', 'result', item.result));
    return details;
  }

  // An edit's hunks (issue 35): each `@@` header and its lines as text nodes, with a
  // Keep/Reject toggle while the extension waits for the answer. Allow then applies the kept
  // hunks only; all rejected is a Deny.
  function renderHunks(item) {
    const review = item.review;
    const rejected = new Set(review.rejected);
    const box = el('div', 'hunks');
    for (const file of review.files) {
      box.appendChild(el('div', 'hunk-file', file.name));
      for (const hunk of file.hunks) {
        const gone = rejected.has(hunk.index);
        const name = `hunk ${hunk.index + 1} of ${review.total}`;
        const part = el('div', 'hunk' + (gone ? ' rejected' : ''));
        const head = el('div', 'hunk-head');
        head.appendChild(el('span', 'hunk-header', hunk.header));
        if (item.buttons) {
          const toggle = button(gone ? 'Keep' : 'Reject',
            () => vscode.postMessage({ type: 'toggleHunk', key: item.answerKey, index: hunk.index }),
            gone ? `Rejected: keep ${name}` : `Kept: reject ${name}`);
          toggle.className = 'hunk-toggle';
          toggle.setAttribute('aria-label', `${gone ? 'Keep' : 'Reject'} ${name}`);
          toggle.setAttribute('aria-pressed', String(gone));
          toggle.dataset.focusKey = 'hunk-' + hunk.index;
          head.appendChild(toggle);
        }
        head.appendChild(el('span', 'hunk-state', gone ? 'rejected' : 'kept'));
        part.appendChild(head);
        const pre = el('pre', 'hunk-lines');
        for (const line of hunk.lines) {
          const kind = line[0] === '+' ? 'add' : line[0] === '-' ? 'del' : 'ctx';
          pre.appendChild(el('span', 'line ' + kind, line || ' '));
        }
        part.appendChild(pre);
        box.appendChild(part);
      }
    }
    if (item.buttons && rejected.size > 0) {
      const kept = review.total - rejected.size;
      box.appendChild(el('div', 'hunk-summary', kept === 0
        ? 'Every hunk rejected: Allow applies nothing (a denial)'
        : `Allow applies ${kept} of ${review.total} hunks`));
    }
    return box;
  }

  function renderApproval(item) {
    const node = el('div', 'item approval ' + item.state);
    node.appendChild(el('div', 'approval-text', item.text));
    if (item.review) node.appendChild(renderHunks(item));
    if (!item.buttons) {
      const waitsInPreview = item.inPreview && item.state === 'pending';
      node.appendChild(el('div', 'approval-state', waitsInPreview ? 'Review in preview' : item.state));
      return node;
    }
    const reason = el('input', 'reason');
    reason.type = 'text';
    reason.placeholder = 'Reason for Deny (optional)';
    reason.setAttribute('aria-label', 'Reason for Deny');
    reason.dataset.focusKey = 'reason';
    const row = el('div', 'approval-buttons');
    for (const title of item.buttons) {
      row.appendChild(button(title, () => {
        vscode.postMessage({ type: 'approve', key: item.answerKey, title, reason: reason.value });
      }));
    }
    if (item.hasDiff) {
      row.appendChild(button('Show diff', () => vscode.postMessage({ type: 'showDiff', key: item.answerKey })));
    }
    node.appendChild(row);
    node.appendChild(reason);
    return node;
  }

  function render(item) {
    switch (item.kind) {
      case 'user': return renderUser(item);
      case 'text': case 'thinking': return renderMarkdown(item);
      case 'tool': return renderTool(item);
      case 'approval': return renderApproval(item);
      case 'stop': return el('div', 'item stop ' + item.reason, '■ ' + item.text);
      default: return el('div', 'item quiet', item.text || '');
    }
  }

  function upsert(item) {
    const node = render(item);
    node.dataset.id = item.id;
    const old = log.querySelector(`[data-id="${CSS.escape(item.id)}"]`);
    // a hunk toggled with the keyboard keeps the focus on its toggle once redrawn
    const focused = old && old.contains(document.activeElement) ? document.activeElement.dataset.focusKey : undefined;
    const asked = old && old.querySelector('.approval-buttons'); // buttons drawn before: no refocus
    const typed = old && old.querySelector('input.reason');
    const reason = node.querySelector('input.reason');
    if (typed && reason) reason.value = typed.value; // a redrawn card keeps the typed reason
    if (old) {
      if (old.tagName === 'DETAILS' && old.open) node.open = true;
      old.replaceWith(node);
    } else {
      log.appendChild(node);
    }
    const again = focused && node.querySelector(`[data-focus-key="${CSS.escape(focused)}"]`);
    if (again) {
      again.focus();
    } else if (item.kind === 'approval' && item.buttons && !asked) {
      const first = node.querySelector('.approval-buttons button');
      if (first && document.activeElement !== input) first.focus();
    }
  }

  // ---- state ----

  function setState(state) {
    running = state.running;
    stopButton.disabled = !running && state.queued.length === 0;
    document.getElementById('session-title').textContent = state.session || '';
    document.getElementById('meter').textContent = state.meter || '';
    document.getElementById('status').textContent = running ? (state.status || 'running…') : '';
    document.body.classList.toggle('running', running);
    queueList.replaceChildren(...state.queued.map((q) => {
      const row = el('div', 'queued');
      row.appendChild(el('span', '', 'queued: ' + q.text));
      row.appendChild(button('Remove', () => vscode.postMessage({ type: 'removeQueued', runId: q.runId })));
      return row;
    }));
    attachmentList.replaceChildren(...state.attachments.map((a) => {
      const chip = el('span', 'chip', a.label + ' ');
      chip.appendChild(button('×', () => vscode.postMessage({ type: 'removeAttachment', index: a.index }), 'Remove'));
      return chip;
    }));
  }

  window.addEventListener('message', (event) => {
    const m = event.data;
    const stick = atBottom();
    if (m.type === 'items') {
      m.items.forEach(upsert);
    } else if (m.type === 'reset') {
      log.replaceChildren();
      m.items.forEach(upsert);
    } else if (m.type === 'state') {
      setState(m);
    } else if (m.type === 'input') {
      input.value = m.text;
      input.focus();
    } else if (m.type === 'focus') {
      input.focus();
    }
    if (stick) log.scrollTop = log.scrollHeight;
  });

  // ---- the user's actions ----

  function send() {
    const text = input.value;
    if (!text.trim()) return;
    input.value = '';
    vscode.postMessage({ type: 'send', text, queue: running && queueMode.checked });
  }

  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    } else if (e.key === 'Escape') {
      e.preventDefault();
      vscode.postMessage({ type: running ? 'stop' : 'focusEditor' });
    }
  });
  input.addEventListener('input', () => {
    const at = input.selectionStart;
    if (input.value[at - 1] === '@' && (at === 1 || /\s/.test(input.value[at - 2]))) {
      input.value = input.value.slice(0, at - 1) + input.value.slice(at);
      vscode.postMessage({ type: 'attachFile' });
    }
  });
  input.addEventListener('paste', (e) => {
    for (const item of e.clipboardData ? e.clipboardData.items : []) {
      if (item.kind !== 'file' || !item.type.startsWith('image/')) continue;
      e.preventDefault();
      const file = item.getAsFile();
      const reader = new FileReader();
      reader.onload = () => {
        const data = String(reader.result).split(',')[1] || '';
        vscode.postMessage({ type: 'image', name: file.name || 'pasted', mimeType: item.type, data });
      };
      reader.readAsDataURL(file);
    }
  });
  document.getElementById('send').addEventListener('click', send);
  document.getElementById('attach').addEventListener('click', () => vscode.postMessage({ type: 'attachFile' }));
  document.getElementById('sessions').addEventListener('click', () => vscode.postMessage({ type: 'sessions' }));
  stopButton.addEventListener('click', () => vscode.postMessage({ type: 'stop' }));

  log.addEventListener('click', (e) => {
    const link = e.target.closest('a');
    if (link) {
      e.preventDefault();
      const href = link.getAttribute('href') || '';
      if (!href.startsWith('#')) vscode.postMessage({ type: 'openLink', href });
      return;
    }
    const copy = e.target.closest('button.copy');
    if (copy) {
      const code = copy.parentElement.querySelector('pre');
      vscode.postMessage({ type: 'copy', text: code ? code.textContent : '' });
      copy.textContent = 'Copied';
      setTimeout(() => { copy.textContent = 'Copy'; }, 1500);
    }
  });

  vscode.postMessage({ type: 'ready' });
  input.focus();
})();
