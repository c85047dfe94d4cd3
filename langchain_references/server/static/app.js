// The evidence service's page. Every untrusted string (article, passages, titles, answers,
// error messages) is inserted with textContent or createTextNode, never as HTML; links are
// made only for http(s) URLs. Served as a file: the Content-Security-Policy forbids inline
// script.
"use strict";

const VERDICT_LABELS = {
  supported: "supported",
  refuted: "contradicted",
  not_enough_evidence: "not enough evidence",
  disputed: "disputed",
  error: "could not check",
};

// What the badge of the offline heuristic says about setting a real judge.
const HOW_TO_SET_A_JUDGE =
  "The service's operator sets an LLM judge with: langchain-references serve --judge " +
  "llm:PROVIDER:MODEL (or an NLI model: --judge nli:MODEL)";

// Longest shown title, passage and message (characters): a 100 KB title used to freeze the
// page for seconds while the browser laid it out. What is left out is counted, not shown.
const MAX_TITLE = 300;
const MAX_PASSAGE = 3000;
const MAX_MESSAGE = 1000;

// The text clipped to max characters (code points, never half a pair), with how many it left.
function clip(text, max) {
  const value = String(text);
  if (value.length <= max) return value; // UTF-16 units: never fewer than code points
  const chars = Array.from(value);
  if (chars.length <= max) return value;
  const left = (chars.length - max).toLocaleString("en");
  return chars.slice(0, max).join("") + "… (" + left + " more characters)";
}

function byId(id) {
  return document.getElementById(id);
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

function safeHref(url) {
  if (typeof url !== "string") return null;
  try {
    const parsed = new URL(url, window.location.href);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch (_err) {
    return null;
  }
}

function link(url, text) {
  const href = safeHref(url);
  const shown = clip(text, MAX_TITLE);
  if (href === null) return el("span", "source", shown);
  const a = el("a", "source", shown);
  a.href = href;
  a.target = "_blank";
  a.rel = "noopener noreferrer";
  return a;
}

// "Judge: KIND (MODEL) — DESCRIPTION" of a judge as the service names it, or null.
function judgeText(judge) {
  if (!judge || typeof judge.kind !== "string") return null;
  const model =
    typeof judge.model === "string" && judge.model ? clip(judge.model, MAX_TITLE) : "no model";
  const description =
    typeof judge.description === "string" ? clip(judge.description, MAX_MESSAGE) : "";
  return "Judge: " + judge.kind + " (" + model + ")" + (description ? " — " + description : "");
}

// Show (or hide, without a judge) the badge naming the judge behind the verdicts; the
// offline heuristic's badge is marked rough and says how to set a real judge.
function showJudge(id, judge) {
  const badge = byId(id);
  clear(badge);
  const text = judgeText(judge);
  badge.hidden = text === null;
  const rough = text !== null && judge.kind === "heuristic";
  badge.classList.toggle("rough", rough);
  if (text === null) {
    delete badge.dataset.kind;
    return;
  }
  badge.dataset.kind = judge.kind;
  badge.appendChild(document.createTextNode(text));
  if (rough) badge.appendChild(el("span", "how", HOW_TO_SET_A_JUDGE));
}

// Show (or hide, without one) the badge naming the model that writes the answer: "Answered
// by: KIND (MODEL) — DESCRIPTION"; the offline extractive answerer's badge is marked rough.
function showAnswerer(answerer) {
  const badge = byId("answer-by");
  clear(badge);
  const known = !!answerer && typeof answerer.kind === "string";
  badge.hidden = !known;
  badge.classList.toggle("rough", known && answerer.kind === "extractive");
  if (!known) {
    delete badge.dataset.kind;
    return;
  }
  badge.dataset.kind = clip(answerer.kind, MAX_TITLE);
  const model =
    typeof answerer.model === "string" && answerer.model
      ? clip(answerer.model, MAX_TITLE)
      : "no model";
  const description =
    typeof answerer.description === "string" ? clip(answerer.description, MAX_MESSAGE) : "";
  const text =
    "Answered by: " + clip(answerer.kind, MAX_TITLE) + " (" + model + ")" +
    (description ? " — " + description : "");
  badge.appendChild(document.createTextNode(text));
}

// Parse a text/event-stream body: calls onEvent(name, data) for each event.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const dispatch = (block) => {
    let name = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") name = value;
      else if (field === "data") data.push(value);
    }
    if (data.length) onEvent(name, JSON.parse(data.join("\n")));
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      dispatch(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
    }
  }
  if (buffer.trim()) dispatch(buffer);
}

function errorMessage(body, status) {
  if (body && typeof body.detail === "string") return clip(body.detail, MAX_MESSAGE);
  if (body && Array.isArray(body.detail) && body.detail.length) {
    const messages = body.detail.map((d) => (d && d.msg) || "invalid input").join("; ");
    return clip(messages, MAX_MESSAGE);
  }
  return "request failed (HTTP " + status + ")";
}

// POST a JSON body and stream the events back; rejects with a readable message.
async function postEvents(path, payload, onEvent) {
  const headers = { "Content-Type": "application/json", Accept: "text/event-stream" };
  const key = byId("api-key").value.trim();
  if (key) headers.Authorization = "Bearer " + key;
  const response = await fetch(path, { method: "POST", headers, body: JSON.stringify(payload) });
  if (!response.ok) {
    let body = null;
    try {
      body = await response.json();
    } catch (_err) {
      body = null;
    }
    throw new Error(errorMessage(body, response.status));
  }
  await readEvents(response, (name, data) => {
    if (name === "error") throw new Error(errorMessage(data, 500));
    onEvent(name, data);
  });
}

function topK() {
  const value = parseInt(byId("top-k").value, 10);
  return Number.isFinite(value) && value > 0 ? value : undefined;
}

// ----------------------------------------------------------------------- article

const claims = new Map();
let claimCount = 0;
let claimsDone = 0;

function setStatus(id, text, isError) {
  const status = byId(id);
  status.textContent = text;
  status.classList.toggle("failed", Boolean(isError));
}

function renderArticle(data) {
  const view = byId("article-view");
  clear(view);
  claims.clear();
  const chars = Array.from(data.text); // offsets are in code points
  let paragraph = el("p");
  view.appendChild(paragraph);
  let cursor = 0;
  const addText = (text) => {
    const parts = text.split(/\n+/);
    parts.forEach((part, i) => {
      if (i > 0) {
        paragraph = el("p");
        view.appendChild(paragraph);
      }
      if (part) paragraph.appendChild(document.createTextNode(part));
    });
  };
  for (const sentence of data.sentences) {
    addText(chars.slice(cursor, sentence.start).join(""));
    const text = chars.slice(sentence.start, sentence.end).join("");
    if (sentence.claim === null || sentence.claim === undefined) {
      paragraph.appendChild(el("span", "sentence", text));
    } else {
      const span = el("span", "claim pending", text);
      span.dataset.claim = String(sentence.claim);
      span.tabIndex = 0;
      span.setAttribute("role", "button");
      span.title = "checking…";
      span.addEventListener("click", () => showEvidence(sentence.claim));
      span.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          showEvidence(sentence.claim);
        }
      });
      paragraph.appendChild(span);
    }
    cursor = sentence.end;
  }
  addText(chars.slice(cursor).join(""));
  claimCount = data.claims.length;
  claimsDone = 0;
}

function claimSpan(id) {
  return byId("article-view").querySelector('span.claim[data-claim="' + Number(id) + '"]');
}

function showClaim(claim) {
  claims.set(claim.id, claim);
  const span = claimSpan(claim.id);
  if (span) {
    span.classList.remove("pending");
    const verdict = Object.hasOwn(VERDICT_LABELS, claim.verdict) ? claim.verdict : "error";
    span.classList.add(verdict);
    span.dataset.verdict = verdict;
    span.title = VERDICT_LABELS[verdict];
  }
  claimsDone += 1;
  setStatus("article-status", claimsDone + " of " + claimCount + " claims checked");
}

function showEvidence(id) {
  const aside = byId("evidence");
  clear(aside);
  for (const span of byId("article-view").querySelectorAll("span.claim.selected")) {
    span.classList.remove("selected");
  }
  const span = claimSpan(id);
  if (span) span.classList.add("selected");
  const claim = claims.get(id);
  if (!claim) {
    aside.appendChild(el("p", "hint", "This claim is still being checked."));
    return;
  }
  const verdict = Object.hasOwn(VERDICT_LABELS, claim.verdict) ? claim.verdict : "error";
  aside.appendChild(el("h3", "claim-text", claim.text));
  const badge = el("p", "verdict " + verdict, VERDICT_LABELS[verdict]);
  // the server's note (confidence and score, or for "not enough evidence" the score beside
  // its threshold and no confidence): the same words as the reports and the CLI
  if (verdict !== "error" && typeof claim.note === "string") {
    badge.appendChild(document.createTextNode(" (" + claim.note + ")"));
  }
  aside.appendChild(badge);
  const judge = judgeText(claim.judge);
  if (judge !== null) aside.appendChild(el("p", "judge", judge));
  if (claim.error) aside.appendChild(el("p", "reason", clip(claim.error, MAX_MESSAGE)));
  if (!claim.passages.length) {
    aside.appendChild(el("p", "hint", "No passage supports or contradicts this claim."));
  }
  const list = el("ol", "passages");
  for (const passage of claim.passages) {
    const item = el("li", "passage " + (passage.stance === "supports" ? "supports" : "contradicts"));
    const head = el("div", "passage-head");
    head.appendChild(el("span", "number", "[" + passage.number + "]"));
    head.appendChild(el("span", "stance", passage.stance));
    item.appendChild(head);
    item.appendChild(el("blockquote", "passage-text", clip(passage.text, MAX_PASSAGE)));
    item.appendChild(link(passage.url, passage.title || passage.url || "source"));
    list.appendChild(item);
  }
  aside.appendChild(list);
  if (claim.references.length) {
    aside.appendChild(el("h4", null, "Sources"));
    const refs = el("ol", "sources");
    for (const ref of claim.references) {
      const item = el("li");
      item.appendChild(el("span", "number", "[" + ref.number + "] "));
      item.appendChild(link(ref.source, ref.title || ref.source || "source " + ref.number));
      refs.appendChild(item);
    }
    aside.appendChild(refs);
  }
}

async function checkArticle(event) {
  event.preventDefault();
  const text = byId("article-text").value;
  const url = byId("article-url").value.trim();
  if (!text.trim() && !url) {
    setStatus("article-status", "Paste an article or give its URL.", true);
    return;
  }
  const payload = text.trim() ? { text } : { url };
  const k = topK();
  if (k) payload.top_k = k;
  const button = byId("article-submit");
  button.disabled = true;
  clear(byId("evidence"));
  byId("evidence").appendChild(el("p", "hint", "Click a claim to see its evidence."));
  showJudge("article-judge", null);
  setStatus("article-status", url && !text.trim() ? "Fetching the article…" : "Splitting…");
  try {
    await postEvents("/v1/article", payload, (name, data) => {
      if (name === "article") {
        renderArticle(data);
        showJudge("article-judge", data.judge);
        setStatus("article-status", "0 of " + data.claims.length + " claims checked");
      } else if (name === "claim") {
        showClaim(data);
      } else if (name === "result") {
        setStatus(
          "article-status",
          "Done: " + data.counts.claims + " claims in " + data.counts.sentences + " sentences.",
        );
        byId("article-view").dataset.done = "true";
      }
    });
  } catch (err) {
    setStatus("article-status", err.message, true);
  } finally {
    button.disabled = false;
  }
}

// ----------------------------------------------------------------------- answer

async function ask(event) {
  event.preventDefault();
  const question = byId("question").value.trim();
  if (!question) {
    setStatus("answer-status", "Ask a question.", true);
    return;
  }
  const payload = {
    question,
    style: "numbers",
    check_citations: byId("check-citations").checked,
  };
  const k = topK();
  if (k) payload.top_k = k;
  const answer = byId("answer");
  const references = byId("references");
  clear(answer);
  clear(references);
  showJudge("answer-judge", null);
  showAnswerer(null);
  delete answer.dataset.done;
  const button = byId("answer-submit");
  button.disabled = true;
  setStatus("answer-status", "Searching…");
  try {
    await postEvents("/v1/answer", payload, (name, data) => {
      if (name === "documents") {
        showAnswerer(data.answerer);
        setStatus("answer-status", data.documents.length + " documents found; answering…");
      } else if (name === "token") {
        answer.appendChild(document.createTextNode(data.text));
      } else if (name === "references") {
        for (const ref of data.references) {
          const item = el("li");
          item.value = ref.number;
          item.appendChild(link(ref.source, ref.title || ref.source || "source " + ref.number));
          references.appendChild(item);
        }
        const check = data.citation_check;
        showJudge("answer-judge", check && check.judge);
        if (check && typeof check.citation_recall === "number") {
          setStatus(
            "answer-status",
            "Citation recall " + check.citation_recall.toFixed(2) +
              ", precision " + Number(check.citation_precision).toFixed(2) + ".",
          );
        } else {
          setStatus("answer-status", "");
        }
      } else if (name === "result") {
        answer.dataset.done = "true";
      }
    });
  } catch (err) {
    setStatus("answer-status", err.message, true);
  } finally {
    button.disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  byId("article-form").addEventListener("submit", checkArticle);
  byId("answer-form").addEventListener("submit", ask);
});
