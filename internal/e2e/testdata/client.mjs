// A real JavaScript client (Node's fetch) driving the server through the
// five endpoints of the interface. Usage: node client.mjs BASE_URL ACCESS_KEY SECRET_KEY
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';

const [base, accessKey, secretKey] = process.argv.slice(2);
const auth = { 'Service-Access-Key': accessKey, 'Service-Secret-Access-Key': secretKey };

async function call(method, path, body, extra = {}) {
  const headers = { ...auth, ...extra };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(base + path, {
    method, headers, body: body === undefined || typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  if (text && res.headers.get('content-type')?.startsWith('application/json')) json = JSON.parse(text);
  return { status: res.status, headers: res.headers, text, json };
}

function event(type, data) {
  return data === undefined ? { eventId: randomUUID(), eventType: type } : { eventId: randomUUID(), eventType: type, data };
}

// 3. Create projection definitions.
let r = await call('POST', '/projections/definitions', {
  projectionName: 'js-orders', feedName: 'jsorder',
  handlers: [
    { eventType: 'OrderPlaced', functions: [
      { function: 'set', targetSelector: '$.projection.customer', eventSelector: '$.event.customer' },
      { function: 'set', targetSelector: '$.projection.note', eventSelector: '$.event.note' },
      { function: 'set', targetSelector: '$.projection.status', rawData: 'placed' } ] },
    { eventType: 'ItemAdded', functions: [
      { function: 'add', targetSelector: '$.projection.total', eventSelector: '$.event.price' },
      { function: 'inc', targetSelector: '$.projection.items' } ] },
  ],
});
assert.equal(r.status, 200, r.text);
r = await call('POST', '/projections/definitions', {
  projectionName: 'js-revenue', feedName: 'jsorder', aggregated: true,
  handlers: [{ eventType: 'ItemAdded', functions: [
    { function: 'add', targetSelector: '$.projection.revenue', eventSelector: '$.event.price' }] }],
});
assert.equal(r.status, 200, r.text);
r = await call('POST', '/projections/definitions', {
  projectionName: 'js-revenue', feedName: 'jsorder', aggregated: true,
  handlers: [{ eventType: 'X', functions: [{ function: 'inc', targetSelector: '$.projection.n' }] }],
});
assert.equal(r.status, 409, 'a definition name is unique');
assert.equal(r.json.code, 'conflict');

// 1. Save events: 200, empty body, Content-Length 0.
const first = [event('OrderPlaced', { customer: 'ada' }), event('ItemAdded', { price: 0.1 }), event('Noted')];
r = await call('POST', '/aggregates/jsorder/o-1/events', { events: first });
assert.equal(r.status, 200, r.text);
assert.equal(r.text, '');
assert.equal(r.headers.get('content-length'), '0');
// A retry after a timeout is idempotent.
r = await call('POST', '/aggregates/jsorder/o-1/events', { events: first });
assert.equal(r.status, 200, r.text);
r = await call('POST', '/aggregates/jsorder/o-1/events', { expectedVersion: 1, aggregateId: 'o-1', events: [event('ItemAdded', { price: 0.2 })] });
assert.equal(r.status, 200, r.text);
r = await call('POST', '/aggregates/jsorder/o-1/events', { expectedVersion: 1, events: [event('ItemAdded', { price: 1 })] });
assert.equal(r.status, 409, 'stale expectedVersion');
r = await call('POST', '/aggregates/jsorder/o-1/events', { events: [{ eventId: 'nope', eventType: 'X' }] });
assert.equal(r.status, 422);
assert.equal(r.json.errors[0].field, 'events[0].eventId');

// 2. Load the aggregate.
r = await call('GET', '/aggregates/jsorder/o-1');
assert.equal(r.status, 200, r.text);
assert.match(r.headers.get('content-type'), /^application\/json/);
assert.match(r.headers.get('vary') ?? '', /Accept-Encoding/);
assert.equal(r.json.aggregateId, 'o-1');
assert.equal(r.json.aggregateType, 'jsorder');
assert.equal(r.json.aggregateVersion, 2, 'two saves, retry excluded');
assert.deepEqual(r.json.events.map(e => e.eventId), [...first.map(e => e.eventId), r.json.events[3].eventId]);
assert.deepEqual(r.json.events[0].data, { customer: 'ada' });
assert.equal('data' in r.json.events[2], false, 'an event saved without data has none');

// 4. Query a single projection: headers, numbers as strings, 304.
r = await call('GET', '/projections/single/js-orders/o-1');
assert.equal(r.status, 200, r.text);
assert.equal(r.json.projectionId, 'o-1');
assert.equal(typeof r.json.updatedAt, 'number');
assert.deepEqual(r.json.data, { customer: 'ada', status: 'placed', total: '0.3', items: '2' });
for (const h of ['etag', 'last-modified', 'content-length']) assert.ok(r.headers.get(h), `missing ${h}`);
assert.match(r.headers.get('vary') ?? '', /Accept-Encoding/);
const etag = r.headers.get('etag');
r = await call('GET', '/projections/single/js-orders/o-1', undefined, { 'If-None-Match': etag });
assert.equal(r.status, 304);

// A large projection comes back gzipped; fetch decompresses it.
const note = 'n'.repeat(4000);
// A JavaScript number cannot hold 2^53 + 1: the body is written as text.
r = await call('POST', '/aggregates/jsorder/o-2/events',
  `{"events": [${JSON.stringify(event('OrderPlaced', { customer: 'bob', note }))},
    {"eventId": "${randomUUID()}", "eventType": "ItemAdded", "data": {"price": 9007199254740993}}]}`);
assert.equal(r.status, 200, r.text);
r = await call('GET', '/projections/single/js-orders/o-2', undefined, { 'Accept-Encoding': 'gzip' });
assert.equal(r.status, 200, r.text);
assert.equal(r.headers.get('content-encoding'), 'gzip');
assert.equal(r.json.data.note, note);
assert.equal(r.json.data.total, '9007199254740993', 'integers above 2^53 stay exact');

// 5. Query the aggregated projection.
r = await call('GET', '/projections/aggregated/js-revenue');
assert.equal(r.status, 200, r.text);
assert.equal(r.json.projectionId, 'js-revenue');
assert.equal(r.json.data.revenue, '9007199254740993.3');
r = await call('GET', '/projections/aggregated/js-orders');
assert.equal(r.status, 404, 'a single projection is not aggregated');

// Authentication.
const anon = await fetch(base + '/aggregates/jsorder/o-1');
assert.equal(anon.status, 401);
assert.equal((await anon.json()).code, 'unauthorized');

console.log('js client: all checks passed');
