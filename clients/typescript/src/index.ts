// The Workspace Platform API client: typed GET/POST/PUT/PATCH/DELETE over the generated
// `paths` (./types.ts, from the contract by openapi-typescript), area helpers for the common
// operations, async iteration over every list, idempotent retries and webhook verification.
// No runtime dependencies: fetch, AbortController and WebCrypto (Node 20+ and browsers).

import type { components, operations, paths } from "./types.js";

export type { components, operations, paths };
export type Schemas = components["schemas"];

type Method = "get" | "post" | "put" | "patch" | "delete";

/** The paths that have `M`. */
export type PathsWith<M extends Method> = {
  [P in keyof paths]: [paths[P][M & keyof paths[P]]] extends [never | undefined] ? never : P;
}[keyof paths];

type Op<P extends keyof paths, M extends Method> = paths[P][M & keyof paths[P]];
type PathParams<O> = O extends { parameters: { path: infer P } } ? P : never;
type QueryParams<O> = O extends { parameters: { query?: infer Q } } ? Q : never;
type BodyOf<O> = O extends { requestBody?: infer R }
  ? [NonNullable<R>] extends [never]
    ? never
    : NonNullable<R> extends { content: { "application/json": infer B } }
      ? B
      : never
  : never;
type JsonOf<R> = R extends { content: { "application/json": infer B } } ? B : undefined;
/** The JSON of an operation's 2xx answer. */
export type Success<O> = O extends { responses: infer R }
  ? JsonOf<R[Extract<keyof R, 200 | 201 | 202 | 204>]>
  : never;
/** The item type of a list operation. */
export type Item<O> = Success<O> extends { data: (infer T)[]; has_more: boolean } ? T : never;

/** Per-call options every method takes. */
export interface CallOptions {
  /** The write's Idempotency-Key; by default a fresh UUID per call, reused by its retries. */
  idempotencyKey?: string;
  /** `X-Capability-Confirmation`: a person's confirmation (cct_...) of this exact write. */
  confirmation?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export type Init<O> = CallOptions &
  ([PathParams<O>] extends [never] ? { path?: undefined } : { path: PathParams<O> }) &
  ([QueryParams<O>] extends [never] ? { query?: undefined } : { query?: QueryParams<O> }) &
  ([BodyOf<O>] extends [never] ? { body?: undefined } : { body: BodyOf<O> });
/** The init argument is optional when nothing in it is required. */
type Args<O> = {} extends Init<O> ? [init?: Init<O>] : [init: Init<O>];

/** The API's error envelope, with the status and Retry-After of the answer. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Array<Record<string, unknown>>,
    readonly requestId: string | undefined,
    /** Seconds, from Retry-After. */
    readonly retryAfter: number | undefined,
  ) {
    super(message);
  }
}

/** No answer arrived: connection refused or dropped, or the per-attempt timeout. */
export class ConnectionError extends Error {
  override readonly name = "ConnectionError";
  constructor(
    message: string,
    readonly timedOut: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export type Credentials =
  | { apiKey: string }
  | { accessToken: string; workspaceId: string }
  | { portalSession: string };

export type ClientOptions = Credentials & {
  /** The deployment's `/api/v1`, e.g. `https://<api-id>.execute-api.<region>.amazonaws.com/api/v1`. */
  baseUrl: string;
  /** Per attempt, in ms. Default 30000. */
  timeoutMs?: number;
  /** Retries of a 429, a 503 or a dropped connection. Default 3. */
  maxRetries?: number;
  /** Another fetch (tests, proxies, instrumentation). */
  fetch?: typeof fetch;
};

/** A raw answer: status, headers, request id and the parsed JSON body. */
export interface Answer<T> {
  status: number;
  headers: Headers;
  requestId: string | undefined;
  body: T;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** 0.5 s, 1 s, 2 s, ... with up to 50 % jitter, at most 20 s. */
function backoff(attempt: number): number {
  const base = Math.min(500 * 2 ** Math.min(attempt, 6), 20_000);
  return base / 2 + Math.random() * (base / 2);
}

export class Client {
  readonly baseUrl: string;
  readonly #options: ClientOptions;
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions) {
    this.#options = options;
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  GET<P extends PathsWith<"get">>(path: P, ...[init]: Args<Op<P, "get">>): Promise<Success<Op<P, "get">>> {
    return this.#body("GET", path, init as RawInit);
  }
  POST<P extends PathsWith<"post">>(path: P, ...[init]: Args<Op<P, "post">>): Promise<Success<Op<P, "post">>> {
    return this.#body("POST", path, init as RawInit);
  }
  PUT<P extends PathsWith<"put">>(path: P, ...[init]: Args<Op<P, "put">>): Promise<Success<Op<P, "put">>> {
    return this.#body("PUT", path, init as RawInit);
  }
  PATCH<P extends PathsWith<"patch">>(path: P, ...[init]: Args<Op<P, "patch">>): Promise<Success<Op<P, "patch">>> {
    return this.#body("PATCH", path, init as RawInit);
  }
  DELETE<P extends PathsWith<"delete">>(path: P, ...[init]: Args<Op<P, "delete">>): Promise<Success<Op<P, "delete">>> {
    return this.#body("DELETE", path, init as RawInit);
  }

  /**
   * Every item of a list, page after page: follows `next_cursor` until `has_more` is false.
   * `for await (const post of client.listAll("/posts", { query: { status: "scheduled" } }))`
   */
  async *listAll<P extends PathsWith<"get">>(path: P, ...[init]: Args<Op<P, "get">>): AsyncGenerator<Item<Op<P, "get">>> {
    const raw = (init ?? {}) as RawInit;
    let cursor: string | undefined;
    for (;;) {
      const query = { ...(raw.query ?? {}), ...(cursor ? { cursor } : {}) };
      const page = (await this.#body("GET", path, { ...raw, query })) as {
        data: Item<Op<P, "get">>[];
        has_more: boolean;
        next_cursor?: string | null;
      };
      yield* page.data;
      if (!page.has_more || !page.next_cursor) return;
      cursor = page.next_cursor;
    }
  }

  /** Any request, untyped, with the status, headers and request id of its answer. */
  async request<T = unknown>(method: string, path: string, init: RawInit = {}): Promise<Answer<T>> {
    const upper = method.toUpperCase();
    const url = this.#url(path, init);
    const write = upper !== "GET";
    // One key for the logical write, reused by every retry of it.
    const key = write ? (init.idempotencyKey ?? globalThis.crypto.randomUUID()) : undefined;
    const headers: Record<string, string> = { Accept: "application/json", ...this.#auth(), ...(init.headers ?? {}) };
    if (key) headers["Idempotency-Key"] = key;
    if (init.confirmation) headers["X-Capability-Confirmation"] = init.confirmation;
    let payload: string | undefined;
    if (init.body !== undefined) {
      headers["Content-Type"] = "application/json";
      payload = JSON.stringify(init.body);
    }
    const maxRetries = this.#options.maxRetries ?? 3;
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await this.#attempt(url, { method: upper, headers, body: payload, signal: init.signal });
      } catch (err) {
        // A GET, or a write whose key makes a second delivery harmless.
        if (err instanceof ConnectionError && attempt < maxRetries && !init.signal?.aborted) {
          await sleep(backoff(attempt));
          continue;
        }
        throw err;
      }
      const requestId = response.headers.get("request-id") ?? undefined;
      const retryAfter = parseRetryAfter(response.headers.get("retry-after"));
      const text = await response.text();
      if (response.ok) {
        return { status: response.status, headers: response.headers, requestId, body: (text ? JSON.parse(text) : undefined) as T };
      }
      if ((response.status === 429 || response.status === 503) && attempt < maxRetries) {
        await sleep(retryAfter !== undefined ? retryAfter * 1000 : backoff(attempt));
        continue;
      }
      throw toApiError(response.status, text, requestId, retryAfter);
    }
  }

  async #body<T>(method: string, path: string, init: RawInit | undefined): Promise<T> {
    return (await this.request<T>(method, path, init ?? {})).body;
  }

  async #attempt(url: string, init: RequestInit & { signal?: AbortSignal | undefined }): Promise<Response> {
    const controller = new AbortController();
    const timeoutMs = this.#options.timeoutMs ?? 30_000;
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    const outer = init.signal;
    const onAbort = () => controller.abort();
    outer?.addEventListener("abort", onAbort, { once: true });
    try {
      return await this.#fetch(url, { ...init, signal: controller.signal });
    } catch (err) {
      if (outer?.aborted) throw err;
      const timedOut = controller.signal.aborted;
      throw new ConnectionError(timedOut ? `no answer within ${timeoutMs} ms` : `the connection failed: ${String(err)}`, timedOut, {
        cause: err,
      });
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener("abort", onAbort);
    }
  }

  #auth(): Record<string, string> {
    const o = this.#options;
    if ("apiKey" in o) return { Authorization: `Bearer ${o.apiKey}` };
    if ("accessToken" in o) return { Authorization: `Bearer ${o.accessToken}`, "x-workspace-id": o.workspaceId };
    return { "X-Portal-Session": o.portalSession };
  }

  #url(path: string, init: RawInit): string {
    const filled = path.replace(/\{([^}]+)\}/g, (_, name: string) => {
      const value = init.path?.[name];
      if (value === undefined) throw new TypeError(`${path}: the path parameter ${name} is missing`);
      return encodeURIComponent(String(value));
    });
    const search = new URLSearchParams();
    for (const [k, v] of Object.entries(init.query ?? {})) {
      if (v === undefined || v === null) continue;
      for (const item of Array.isArray(v) ? v : [v]) search.append(k, String(item));
    }
    const qs = search.toString();
    return `${this.baseUrl}${filled}${qs ? `?${qs}` : ""}`;
  }

  // The common operations by area; everything else through GET/POST/PUT/PATCH/DELETE.
  readonly posts = {
    list: (query?: Query<"/posts">) => this.GET("/posts", { query }),
    listAll: (query?: Query<"/posts">) => this.listAll("/posts", { query }),
    get: (id: string) => this.GET("/posts/{id}", { path: { id } }),
    create: (body: Body<"/posts", "post">, options?: CallOptions) => this.POST("/posts", { body, ...options }),
    update: (id: string, body: Body<"/posts/{id}", "patch">, options?: CallOptions) =>
      this.PATCH("/posts/{id}", { path: { id }, body, ...options }),
    delete: (id: string, options?: CallOptions) => this.DELETE("/posts/{id}", { path: { id }, ...options }),
  };

  readonly contacts = {
    list: (query?: Query<"/contacts">) => this.GET("/contacts", { query }),
    listAll: (query?: Query<"/contacts">) => this.listAll("/contacts", { query }),
    get: (id: string) => this.GET("/contacts/{id}", { path: { id } }),
    create: (body: Body<"/contacts", "post">, options?: CallOptions) => this.POST("/contacts", { body, ...options }),
    update: (id: string, body: Body<"/contacts/{id}", "patch">, options?: CallOptions) =>
      this.PATCH("/contacts/{id}", { path: { id }, body, ...options }),
    delete: (id: string, options?: CallOptions) => this.DELETE("/contacts/{id}", { path: { id }, ...options }),
  };

  readonly emails = {
    send: (body: Body<"/emails", "post">, options?: CallOptions) => this.POST("/emails", { body, ...options }),
    list: (query?: Query<"/emails">) => this.GET("/emails", { query }),
    listAll: (query?: Query<"/emails">) => this.listAll("/emails", { query }),
    get: (id: string) => this.GET("/emails/{id}", { path: { id } }),
  };

  readonly webhooks = {
    create: (body: Body<"/webhooks", "post">, options?: CallOptions) => this.POST("/webhooks", { body, ...options }),
    list: (query?: Query<"/webhooks">) => this.GET("/webhooks", { query }),
    listAll: (query?: Query<"/webhooks">) => this.listAll("/webhooks", { query }),
    get: (id: string) => this.GET("/webhooks/{id}", { path: { id } }),
    update: (id: string, body: Body<"/webhooks/{id}", "patch">, options?: CallOptions) =>
      this.PATCH("/webhooks/{id}", { path: { id }, body, ...options }),
    delete: (id: string, options?: CallOptions) => this.DELETE("/webhooks/{id}", { path: { id }, ...options }),
    /** Checks a delivery's signature and timestamp; see {@link verifyWebhook}. */
    verify: verifyWebhook,
  };

  /**
   * Capability confirmations. A key created with `requires_confirmation` gets 428
   * CONFIRMATION_REQUIRED on confirmable writes (`details[0].meta` names the capability,
   * method, path and body_sha256). A person (an OAuth token with the `confirm` scope) mints
   * a token for that exact request; the agent sends the same request again with
   * `{ idempotencyKey, confirmation: token }`.
   */
  readonly confirmations = {
    mint: (body: Body<"/capability-confirmations", "post">, options?: CallOptions) =>
      this.POST("/capability-confirmations", { body, ...options }),
    list: (query?: Query<"/capability-confirmations">) => this.GET("/capability-confirmations", { query }),
    get: (id: string) => this.GET("/capability-confirmations/{id}", { path: { id } }),
    capabilities: () => this.GET("/capabilities"),
    /** The body_sha256 of a body as this client sends it (JSON.stringify). */
    bodySha256: async (body: unknown): Promise<string> => hex(await sha256(new TextEncoder().encode(JSON.stringify(body)))),
  };

  /**
   * Approval requests. A restricted key's 428 with an `Idempotency-Key` records one
   * (`details[0].meta.approval_request_id`) with a preview of everything the write will do. A
   * person who may cause the effect themselves approves or denies it; the agent then sends the
   * same request with the same `idempotencyKey` (no token needed) and it runs once.
   */
  readonly approvals = {
    list: (query?: Query<"/approval-requests">) => this.GET("/approval-requests", { query }),
    get: (id: string) => this.GET("/approval-requests/{id}", { path: { id } }),
    approve: (id: string, options?: CallOptions) => this.POST("/approval-requests/{id}/approve", { path: { id }, ...options }),
    deny: (id: string, body: Body<"/approval-requests/{id}/deny", "post">, options?: CallOptions) =>
      this.POST("/approval-requests/{id}/deny", { path: { id }, body, ...options }),
  };
}

type RawInit = CallOptions & {
  path?: Record<string, string | number>;
  query?: Record<string, unknown>;
  body?: unknown;
};
type Query<P extends PathsWith<"get">> = QueryParams<Op<P, "get">>;
type Body<P extends keyof paths, M extends Method> = BodyOf<Op<P, M>>;

function parseRetryAfter(value: string | null): number | undefined {
  if (value === null) return undefined;
  const seconds = Number(value.trim());
  if (Number.isFinite(seconds) && seconds >= 0) return seconds;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

function toApiError(status: number, text: string, requestId: string | undefined, retryAfter: number | undefined): ApiError {
  try {
    const e = (JSON.parse(text) as { error?: { code?: string; message?: string; details?: []; request_id?: string } }).error;
    if (e?.code) return new ApiError(status, e.code, e.message ?? "", e.details ?? [], e.request_id ?? requestId, retryAfter);
  } catch {
    // Not the API's envelope: a proxy or load balancer answered.
  }
  return new ApiError(status, `HTTP_${status}`, text.slice(0, 512), [], requestId, retryAfter);
}

// Webhook verification ---------------------------------------------------------------------

export interface VerifyOptions {
  /** How far the timestamp may be from now, in seconds. Default 300. */
  toleranceSeconds?: number;
  /** Unix seconds to check against; default now. */
  now?: number;
}

type HeaderBag = Headers | Record<string, string | string[] | undefined>;

function header(headers: HeaderBag, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined;
  for (const [k, v] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (k.toLowerCase() === name) return Array.isArray(v) ? v.join(" ") : v;
  }
  return undefined;
}

/**
 * Whether a delivery is genuine: `X-Service-Signature` holds `v1,<base64>` entries (one per
 * valid secret while a secret rotates) of HMAC-SHA256 over `{X-Service-Timestamp}.{rawBody}`,
 * keyed by the secret decoded from base64 after `whsec_`, and the timestamp is within the
 * tolerance. Pass the body exactly as received (a string or its bytes), never re-serialised.
 */
export async function verifyWebhook(
  secret: string,
  headers: HeaderBag,
  rawBody: string | Uint8Array | ArrayBuffer,
  options: VerifyOptions = {},
): Promise<boolean> {
  const timestamp = header(headers, "x-service-timestamp")?.trim();
  const signature = header(headers, "x-service-signature");
  if (!timestamp || !/^\d+$/.test(timestamp) || !signature || !secret.startsWith("whsec_")) return false;
  const now = options.now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(timestamp)) > (options.toleranceSeconds ?? 300)) return false;
  let key: Uint8Array;
  try {
    key = fromBase64(secret.slice("whsec_".length));
  } catch {
    return false;
  }
  const body = typeof rawBody === "string" ? new TextEncoder().encode(rawBody) : new Uint8Array(rawBody);
  const signed = concat(new TextEncoder().encode(`${timestamp}.`), body);
  const cryptoKey = await globalThis.crypto.subtle.importKey("raw", key as BufferSource, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const expected = new Uint8Array(await globalThis.crypto.subtle.sign("HMAC", cryptoKey, signed as BufferSource));
  let matched = false;
  for (const entry of signature.split(" ")) {
    if (!entry.startsWith("v1,")) continue;
    let given: Uint8Array;
    try {
      given = fromBase64(entry.slice(3));
    } catch {
      continue;
    }
    // Every entry is compared in full: the time taken does not tell which bytes matched.
    matched = constantTimeEqual(given, expected) || matched;
  }
  return matched;
}

function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}

function fromBase64(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await globalThis.crypto.subtle.digest("SHA-256", bytes as BufferSource));
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
