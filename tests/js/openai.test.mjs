// The official `openai` client against `1bit lemonade`: chat and completions, streamed and not,
// model listing, LRU eviction under --max-loaded-models 1 and both models kept under 2, and a
// busy model that is not evicted mid-stream.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startLemonade } from './lemon.mjs';

const client = (server) => new OpenAI({ baseURL: server.base + '/api/v1', apiKey: 'unused', maxRetries: 0 });

test('chat and completions, streamed and not, through the openai client', async () => {
  const server = await startLemonade();
  try {
    const openai = client(server);
    const models = await openai.models.list();
    assert.ok(models.data.some((m) => m.id === '1bit-tiny'));

    const chat = await openai.chat.completions.create({
      model: '1bit-tiny', temperature: 0, max_tokens: 40,
      messages: [{ role: 'user', content: 'define apple' }],
    });
    assert.match(chat.choices[0].message.content, /apple \(noun\)/);
    assert.ok(chat.usage.completion_tokens > 0);

    const stream = await openai.chat.completions.create({
      model: '1bit-tiny', temperature: 0, max_tokens: 24, stream: true,
      messages: [{ role: 'user', content: 'Quote Genesis 1:1.' }],
    });
    let text = '', chunks = 0, finish = null;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.ok(chunks > 3, `only ${chunks} chunks`);
    assert.ok(text.length > 0);
    assert.ok(finish === 'stop' || finish === 'length', String(finish));

    const completion = await openai.completions.create({ model: '1bit-tiny', prompt: 'def add(a, b):', max_tokens: 16, temperature: 0 });
    assert.ok(completion.choices[0].text.length > 0);
    let streamed = '';
    for await (const c of await openai.completions.create({ model: '1bit-tiny', prompt: 'def add(a, b):', max_tokens: 16,
                                                             temperature: 0, stream: true })) {
      streamed += c.choices[0]?.text ?? '';
    }
    assert.equal(streamed, completion.choices[0].text);  // greedy: the same text both ways

    await assert.rejects(openai.chat.completions.create({ model: 'no-such-model', messages: [] }),
                         (e) => e.status === 404 && e.code === 'model_not_found');
  } finally {
    await server.stop();
  }
});

test('two models with a limit of one: the other is evicted, visibly in /health', async () => {
  const server = await startLemonade(['--max-loaded-models', '1']);
  try {
    const openai = client(server);
    const ask = (model) => openai.chat.completions.create({ model, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] });
    await ask('1bit-tiny');
    assert.deepEqual(await server.loaded(), ['1bit-tiny']);
    await ask('synth-llama');
    assert.deepEqual(await server.loaded(), ['synth-llama']);
  } finally {
    await server.stop();
  }
});

test('two models with a limit of two: both stay', async () => {
  const server = await startLemonade(['--max-loaded-models', '2']);
  try {
    const openai = client(server);
    const ask = (model) => openai.chat.completions.create({ model, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] });
    await ask('1bit-tiny');
    await ask('synth-llama');
    assert.deepEqual(await server.loaded(), ['1bit-tiny', 'synth-llama']);
  } finally {
    await server.stop();
  }
});

test('a busy model is not evicted mid-stream', async () => {
  const server = await startLemonade(['--max-loaded-models', '1']);
  try {
    const openai = client(server);
    await server.post('/api/v1/load', { model_name: '1bit-tiny', llamacpp_args: '-np 1' });
    const long = await openai.completions.create({ model: '1bit-tiny', prompt: 'x', max_tokens: 900, temperature: 0,
                                                   stream: true, ignore_eos: true });
    let chunks = 0, finish = null, other = null;
    for await (const c of long) {
      if (++chunks === 20) {
        // Another model now, under a limit of one: it must wait for this stream to end.
        other = openai.chat.completions.create({ model: 'synth-llama', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] });
      }
      finish = c.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(finish, 'length');
    assert.ok(chunks >= 900, `the stream was cut after ${chunks} chunks`);
    const answer = await other;
    assert.equal(answer.usage.completion_tokens, 4);
    assert.deepEqual(await server.loaded(), ['synth-llama']);
  } finally {
    await server.stop();
  }
});
