// The official `ollama` client against `1bit serve` and `1bit lemonade`, unchanged: version,
// list, show, ps, chat and generate streamed and not, JSON formats, embeddings, errors, and on
// lemonade loads on demand, a swap under a limit of one model, keep_alive and pull/delete.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { source, startLemonade, startServe } from './lemon.mjs';

const greedy = { temperature: 0, num_predict: 40 };
const apple = [{ role: 'user', content: 'define apple' }];

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push(part);
  return parts;
}

// A rejection from the ollama client with this HTTP status and a message matching `pattern`.
const refused = (status, pattern) => (e) => e.status_code === status && pattern.test(e.error);

test('1bit serve answers the ollama client', async () => {
  // Engine options as llama-server takes them: embeddings with mean pooling beside chat.
  const server = await startServe(['-m', join(source, 'models', '1bit-tiny-32m-q8_0.gguf'), '--embeddings',
                                   '--pooling', 'mean']);
  try {
    const ollama = new Ollama({ host: server.base });
    const name = '1bit-tiny-32m-q8_0';
    assert.match((await ollama.version()).version, /^\d+\.\d+\.\d+/);

    const { models } = await ollama.list();
    assert.deepEqual(models.map((m) => m.name), [name]);
    assert.equal(models[0].details.quantization_level, 'Q8_0');
    assert.equal(models[0].details.family, 'qwen3');

    const shown = await ollama.show({ model: name });
    assert.ok(shown.model_info['qwen3.context_length'] > 0);
    assert.deepEqual(shown.capabilities, ['completion']);
    const running = await ollama.ps();
    assert.equal(running.models[0].name, name);
    assert.ok(running.models[0].context_length > 0);

    // Greedy: the Ollama route and the OpenAI route give the same answer.
    const chat = await ollama.chat({ model: name, messages: apple, options: greedy });
    assert.match(chat.message.content, /apple \(noun\)/);
    assert.equal(chat.done, true);
    assert.ok(['stop', 'length'].includes(chat.done_reason));
    assert.ok(chat.eval_count > 0 && chat.prompt_eval_count > 0);
    assert.ok(chat.total_duration >= chat.eval_duration && chat.eval_duration > 0);
    const openai = new OpenAI({ baseURL: server.base + '/v1', apiKey: 'unused', maxRetries: 0 });
    const viaOpenai = await openai.chat.completions.create({ model: name, messages: apple, temperature: 0, max_tokens: 40 });
    assert.equal(chat.message.content, viaOpenai.choices[0].message.content);

    const parts = await collect(await ollama.chat({ model: name, messages: apple, options: greedy, stream: true }));
    assert.ok(parts.length > 3, `only ${parts.length} parts`);
    assert.equal(parts.map((p) => p.message.content).join(''), chat.message.content);
    assert.equal(parts.at(-1).done, true);
    assert.equal(parts.at(-1).eval_count, chat.eval_count);

    const generated = await ollama.generate({ model: name, prompt: 'def add(a, b):', raw: true, options: greedy });
    assert.ok(generated.response.length > 0);
    const streamed = await collect(await ollama.generate({ model: name, prompt: 'def add(a, b):', raw: true,
                                                           options: greedy, stream: true }));
    assert.equal(streamed.map((p) => p.response).join(''), generated.response);
    const templated = await ollama.generate({ model: name, prompt: 'define apple', options: greedy });
    assert.equal(templated.response, chat.message.content);  // the prompt as one user message

    const schema = { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] };
    const shaped = await ollama.chat({ model: name, messages: [{ role: 'user', content: 'json' }], format: schema,
                                      options: { temperature: 0, num_predict: 60 } });
    assert.equal(typeof JSON.parse(shaped.message.content).a, 'number');
    const object = await ollama.generate({ model: name, prompt: 'json', format: 'json', options: greedy });
    assert.match(object.response, /^\s*\{/);

    const { embeddings } = await ollama.embed({ model: name, input: ['hello', 'world'] });
    assert.equal(embeddings.length, 2);
    assert.equal(embeddings[0].length, shown.model_info['qwen3.embedding_length']);
    const { embedding } = await ollama.embeddings({ model: name, prompt: 'hello' });
    assert.deepEqual(embedding, embeddings[0]);

    // keep_alive is accepted; serve keeps its one model.
    await ollama.generate({ model: name, prompt: 'hi', options: { num_predict: 2 }, keep_alive: 0 });
    assert.equal((await ollama.ps()).models.length, 1);

    await assert.rejects(ollama.chat({ model: 'llama3', messages: apple }), refused(404, /not found/));
    await assert.rejects(ollama.chat({ model: name, messages: [{ role: 'user', content: 'what is it?', images: ['iVBOR'] }] }),
                         refused(400, /images are not supported/));
    await assert.rejects(ollama.chat({ model: name, messages: apple, options: { top_k: 'many' } }),
                         refused(400, /options\.top_k must be an integer/));
    await assert.rejects(ollama.pull({ model: 'llama3' }), refused(400, /downloads nothing/));
  } finally {
    await server.stop();
  }
});

test('1bit lemonade answers the ollama client, swapping models under a limit of one', async () => {
  const server = await startLemonade(['--max-loaded-models', '1']);
  try {
    const ollama = new Ollama({ host: server.base });
    const names = (await ollama.list()).models.map((m) => m.name);
    assert.ok(names.includes('1bit-tiny') && names.includes('synth-llama'), names.join(', '));
    assert.equal((await ollama.show({ model: '1bit-tiny' })).details.family, 'qwen3');
    assert.deepEqual((await ollama.ps()).models, []);

    const chat = await ollama.chat({ model: '1bit-tiny', messages: apple, options: greedy });
    assert.match(chat.message.content, /apple \(noun\)/);
    assert.ok(chat.load_duration > 0);  // loaded for this request
    const parts = await collect(await ollama.chat({ model: '1bit-tiny', messages: apple, options: greedy, stream: true }));
    assert.equal(parts.map((p) => p.message.content).join(''), chat.message.content);
    const openai = new OpenAI({ baseURL: server.base + '/api/v1', apiKey: 'unused', maxRetries: 0 });
    const viaOpenai = await openai.chat.completions.create({ model: '1bit-tiny', messages: apple, temperature: 0, max_tokens: 40 });
    assert.equal(chat.message.content, viaOpenai.choices[0].message.content);
    assert.deepEqual((await ollama.ps()).models.map((m) => m.name), ['1bit-tiny']);

    // Another model under a limit of one: it takes the place of the first.
    const generated = await ollama.generate({ model: 'synth-llama', prompt: 'hi', options: { num_predict: 4 } });
    assert.equal(generated.eval_count, 4);
    const streamed = await collect(await ollama.generate({ model: 'synth-llama', prompt: 'hi', stream: true,
                                                           options: { num_predict: 4 } }));
    assert.equal(streamed.at(-1).eval_count, 4);
    assert.deepEqual((await ollama.ps()).models.map((m) => m.name), ['synth-llama']);

    // keep_alive: a duration shows in ps; 0 unloads once answered; without a prompt, 0 only unloads.
    await ollama.generate({ model: 'synth-llama', prompt: 'hi', options: { num_predict: 1 }, keep_alive: '1h' });
    const expires = Date.parse((await ollama.ps()).models[0].expires_at) - Date.now();
    assert.ok(expires > 3500e3 && expires <= 3600e3, `expires in ${expires} ms`);
    await ollama.generate({ model: 'synth-llama', prompt: 'hi', options: { num_predict: 1 }, keep_alive: 0 });
    assert.deepEqual((await ollama.ps()).models, []);
    await ollama.chat({ model: '1bit-tiny', messages: [] });  // loads it
    assert.deepEqual((await ollama.ps()).models.map((m) => m.name), ['1bit-tiny']);
    const unloaded = await ollama.generate({ model: '1bit-tiny', prompt: '', keep_alive: 0 });
    assert.equal(unloaded.done_reason, 'unload');
    assert.deepEqual((await ollama.ps()).models, []);

    // Pull registers a GGUF of the models directories; a hub name is refused; delete forgets it.
    await assert.rejects(ollama.pull({ model: 'llama3.2:1b' }), refused(400, /does not download models/));
    assert.equal((await ollama.pull({ model: 'synth-llama.gguf' })).status, 'success');
    assert.ok((await ollama.list()).models.some((m) => m.name === 'user.synth-llama'));
    // An embedding model (random weights without pooling of their own: lemonade's load gives it one).
    await server.post('/api/v1/pull', { model_name: 'embed', checkpoint: 'synth-llama.gguf', embeddings: true });
    await server.post('/api/v1/load', { model_name: 'user.embed', llamacpp_args: '--pooling mean' });
    const { embeddings } = await ollama.embed({ model: 'user.embed', input: 'hello world' });
    assert.equal(embeddings[0].length, 64);  // tiny-llama is 64 wide
    assert.equal((await ollama.delete({ model: 'user.synth-llama' })).status, 'success');
    assert.ok(!(await ollama.list()).models.some((m) => m.name === 'user.synth-llama'));
    await assert.rejects(ollama.delete({ model: 'user.synth-llama' }), refused(404, /not found/));
    await assert.rejects(ollama.delete({ model: '1bit-tiny' }), refused(400, /remove the file/));
    await assert.rejects(ollama.show({ model: 'no-such-model' }), refused(404, /not found/));
  } finally {
    await server.stop();
  }
});
