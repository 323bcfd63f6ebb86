// A stand-in OpenAI-compatible chat server for `make conformance CONFORMANCE_LLM=stub`: the SDK
// suite's chat tests need an LLM to answer, not a good one. Run with bun:
//
//   bun scripts/llm-stub.ts PORT
//
// POST /v1/chat/completions answers a plain-text request with one sentence naming the question,
// and a structured-output request (`response_format`) with an object of the schema's shape, each
// property a neutral value of its type. A request with `stream: true` gets the sentence as
// server-sent chunks, a word each, then `data: [DONE]`. Nothing is remembered.

const port = Number(process.argv[2] ?? "18600");

type Schema = { type?: string; properties?: Record<string, Schema> };

function valueOf(schema: Schema | undefined): unknown {
  switch (schema?.type) {
    case "string":
      return "stub";
    case "number":
    case "integer":
      return 0;
    case "boolean":
      return false;
    case "array":
      return [];
    default:
      return Object.fromEntries(
        Object.entries(schema?.properties ?? {}).map(([k, v]) => [k, valueOf(v)]),
      );
  }
}

Bun.serve({
  port,
  hostname: "127.0.0.1",
  async fetch(req) {
    const url = new URL(req.url);
    if (req.method !== "POST" || url.pathname !== "/v1/chat/completions") {
      return new Response("not found", { status: 404 });
    }
    const body = await req.json();
    const format = body.response_format;
    const last = body.messages?.at(-1)?.content ?? "";
    const question = String(last).split("Question: ").at(-1);
    const content = format
      ? JSON.stringify(valueOf(format.json_schema?.schema ?? { type: "object" }))
      : `The stub LLM read the material and was asked: ${question}`;
    if (body.stream) {
      // Server-sent chunks, a word at a time, as a streaming model sends them.
      const words = content.match(/\S+\s*/g) ?? [];
      const chunk = (delta: object) =>
        `data: ${JSON.stringify({
          id: "chatcmpl-stub",
          object: "chat.completion.chunk",
          model: body.model,
          choices: [{ index: 0, delta, finish_reason: null }],
        })}\n\n`;
      const events = [...words.map((w) => chunk({ content: w })), "data: [DONE]\n\n"];
      return new Response(events.join(""), {
        headers: { "content-type": "text/event-stream" },
      });
    }
    return Response.json({
      id: "chatcmpl-stub",
      object: "chat.completion",
      model: body.model,
      choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
    });
  },
});
console.error(`llm-stub: listening on 127.0.0.1:${port}`);
