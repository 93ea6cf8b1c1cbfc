// Follows the log of a step that is still running: polls the log API for the bytes after
// those on the page and appends them as numbered lines, like `tail -f`. The page reads
// fine without this script; it only saves reloading while a long build or test runs.
(function () {
  const pre = document.getElementById("log");
  if (!pre || !pre.dataset.followUrl) return;
  const note = document.getElementById("log-live-note");
  const count = document.getElementById("log-lines");
  const url = pre.dataset.followUrl;
  const POLL_MS = 1500;
  const CHUNK = 1 << 20;  // bytes per request; a backlog is fetched in several at once
  // A live page that grew this long stops following: the paged view handles long logs.
  const MAX_APPENDED_LINES = 20000;

  let offset = Number(pre.dataset.offset);
  let lastLine = Number(pre.dataset.lastLine);
  let partial = pre.dataset.partial === "true";  // the last line shown lacks its newline
  let appended = 0;
  const decoder = new TextDecoder("utf-8");  // streaming: keeps a character split between reads

  function newLine(text) {
    lastLine += 1;
    appended += 1;
    const span = document.createElement("span");
    span.className = "ln";
    span.id = "L" + lastLine;
    const no = document.createElement("a");
    no.className = "no";
    no.href = "#L" + lastLine;
    no.textContent = String(lastLine);
    span.append(no, text);  // text nodes: never HTML from the log
    pre.appendChild(span);
  }

  function append(text) {
    // Lines end at "\n" only, as on the server's pages; a "\r" before it is dropped.
    const pieces = text.split("\n");
    pieces.forEach(function (piece, i) {
      const last = i === pieces.length - 1;
      if (last && piece === "") return;  // the text ended with a newline
      const clean = last ? piece : piece.replace(/\r$/, "");
      if (i === 0 && partial) {
        const span = document.getElementById("L" + lastLine);
        if (span) span.append(clean);
      } else {
        newLine(clean);
      }
    });
    if (text.length > 0) partial = !text.endsWith("\n");
    if (count) count.textContent = String(lastLine);
  }

  function atBottom() {
    return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 40;
  }

  function finish(message) {
    note.replaceChildren(message + " ");
    const link = document.createElement("a");
    link.href = window.location.pathname;
    link.textContent = "Reload for its pages";
    note.appendChild(link);
    note.dataset.state = "finished";
  }

  async function poll() {
    let response, bytes;
    try {
      response = await fetch(url + "?offset=" + offset + "&limit=" + CHUNK, { cache: "no-store" });
      if (!response.ok) throw new Error(response.status);
      bytes = new Uint8Array(await response.arrayBuffer());
    } catch (err) {
      setTimeout(poll, POLL_MS * 3);  // the server may be restarting: back off, keep trying
      return;
    }
    const follow = atBottom();
    offset += bytes.length;
    append(decoder.decode(bytes, { stream: true }));
    if (follow && bytes.length > 0) window.scrollTo(0, document.documentElement.scrollHeight);
    const size = Number(response.headers.get("X-Log-Size"));
    const complete = response.headers.get("X-Log-Complete") === "true";
    if (complete && offset >= size) {
      finish("The step finished.");
      return;
    }
    if (appended >= MAX_APPENDED_LINES) {
      finish("Stopped following after " + appended + " new lines.");
      return;
    }
    setTimeout(poll, offset < size ? 0 : POLL_MS);
  }
  setTimeout(poll, POLL_MS);
})();
