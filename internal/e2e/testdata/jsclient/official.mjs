// Drives the official JavaScript client, @serialized/serialized-client
// 4.12.0 (pinned in package.json and package-lock.json), against the server:
// every method of its aggregates, projections, feeds, tenants and reactions
// clients that the server implements, asserting results. Run by internal/e2e
// TestOfficialJavaScriptClient. Usage: node official.mjs BASE_URL ACCESS_KEY SECRET_KEY
//
// The client's own bugs, each met below with the workaround a user applies
// (the README's "Using the official clients" says the same):
//  1. It ignores its client.baseUrl option and always calls
//     https://api.serialized.io: set axiosClient.defaults.baseURL on every
//     client it creates.
//  2. Its error type guards (isConflict, isProjectionNotFound, ...) are not
//     exported from the package entry point: import them from
//     '@serialized/serialized-client/dist/error.js'.
//  3. bulkUpdate sends batches without aggregateId: the server refuses them
//     with 422 and stores nothing; use saveBulk with the ids.
//  4. bulkSave logs errors with console.log and returns undefined instead of
//     throwing: use saveBulk, which throws.
//  5. getCurrentSequenceNumber and getGlobalSequenceNumber read the header
//     'Serialized-SequenceNumber-Current', but Node's HTTP client lowercases
//     header names, so they return NaN: send the HEAD with axiosClient and
//     read 'serialized-sequencenumber-current'.
//  6. loadAllFeed passes its options object to axios as it is, which encodes
//     an array as types[]=a&types[]=b: the server refuses unknown parameters
//     with 400; use loadFeed({feedName: '_all'}, {types}) instead.
//  7. Errors carry only the status (SerializedApiError.statusCode); the
//     client drops the JSON error body with its message.
//  8. listSingleProjections copies only the options it knows into the
//     query string, and search is not one of them: it is dropped silently
//     and every instance is listed. Send GET /projections/single/{name}
//     ?search= with axiosClient.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import client from '@serialized/serialized-client';
import errors from '@serialized/serialized-client/dist/error.js';

const { Serialized, DomainEvent, ProjectionType } = client;
const [base, accessKey, secretKey] = process.argv.slice(2);

// Workaround 1: the baseUrl option is ignored.
const serialized = Serialized.create({ accessKey, secretAccessKey: secretKey, client: { baseUrl: base } });
function pointed(c) {
  assert.equal(c.axiosClient.defaults.baseURL, 'https://api.serialized.io', 'bug 1 is still there: baseUrl ignored');
  c.axiosClient.defaults.baseURL = base;
  return c;
}

// The client logs every aggregate load; keep the output for our checks.
const log = console.log;
console.log = () => {};

// Events are classes: the client takes the event type from the class name.
class OrderPlaced { constructor(customer) { this.customer = customer; } }
class ItemAdded { constructor(sku, price) { this.sku = sku; this.price = price; } }
class OrderCancelled { constructor(reason) { this.reason = reason; } }

// An aggregate as the @Aggregate decorator would make it, without the
// decorator syntax: aggregateType, initialState and eventHandlers on the
// instance.
class Order {
  constructor(state) {
    this.aggregateType = 'jsorder';
    this.initialState = () => ({ status: 'new', total: 0, items: 0 });
    this.eventHandlers = {
      OrderPlaced: (s, e) => ({ ...s, status: 'placed', customer: e.data.customer }),
      ItemAdded: (s, e) => ({ ...s, total: s.total + e.data.price, items: s.items + 1 }),
      OrderCancelled: (s) => ({ ...s, status: 'cancelled' }),
    };
    this.state = state;
  }
  place(customer) {
    if (this.state.status !== 'new') throw new Error('already placed');
    return [DomainEvent.create(new OrderPlaced(customer))];
  }
  add(sku, price) { return [DomainEvent.create(new ItemAdded(sku, price))]; }
  cancel(reason) { return [DomainEvent.create(new OrderCancelled(reason))]; }
}
class Other {
  constructor(state) {
    this.aggregateType = 'jsother';
    this.initialState = () => ({});
    this.eventHandlers = { OrderPlaced: (s) => s };
    this.state = state;
  }
}

const orders = pointed(serialized.aggregateClient(Order));
const others = pointed(serialized.aggregateClient(Other));
const projections = pointed(serialized.projectionsClient());
const feeds = pointed(serialized.feedsClient());

const results = [];
async function step(name, fn) {
  try {
    await fn();
    results.push([name, 'ok']);
  } catch (e) {
    results.push([name, 'FAILED: ' + (e && e.stack ? e.stack : e)]);
  }
}
async function rejects(fn, guard, what) {
  try {
    await fn();
  } catch (e) {
    assert.ok(guard(e), `${what}: got ${e && e.constructor && e.constructor.name} ${e && e.statusCode} ${e}`);
    return e;
  }
  assert.fail(`${what}: no error`);
}
const status = (code) => (e) => errors.isSerializedApiError(e) && e.statusCode === code;
const placed = (customer) => [DomainEvent.create(new OrderPlaced(customer))];
// The version as the client's update sees it (loadInternal is what update
// and bulkUpdate call; the client has no public load).
const version = async (c, id) => (await c.loadInternal(id)).metadata.version;
const state = async (c, id) => (await c.loadInternal(id)).aggregate.state;

// ---- projections: definitions
await step('projections.createOrUpdateDefinition', async () => {
  await projections.createOrUpdateDefinition({
    projectionName: 'jsc-orders', feedName: 'jsorder', description: 'Each order: customer, status, total.',
    // Searchable by customer (the client's types lack indexedFields, but
    // createOrUpdateDefinition sends the request as it is).
    indexedFields: ['$.projection.customer'],
    handlers: [
      { eventType: 'OrderPlaced', functions: [
        { function: 'set', targetSelector: '$.projection.customer', eventSelector: '$.event.customer' },
        { function: 'set', targetSelector: '$.projection.status', rawData: 'placed' }] },
      { eventType: 'ItemAdded', functions: [
        { function: 'add', targetSelector: '$.projection.total', eventSelector: '$.event.price' },
        { function: 'inc', targetSelector: '$.projection.items' }] },
    ],
  });
  await projections.createOrUpdateDefinition({
    projectionName: 'jsc-revenue', feedName: 'jsorder', aggregated: true,
    handlers: [{ eventType: 'ItemAdded', functions: [
      { function: 'add', targetSelector: '$.projection.revenue', eventSelector: '$.event.price' }] }],
  });
  // Update: PUT replaces the definition.
  await projections.createOrUpdateDefinition({
    projectionName: 'jsc-count', feedName: 'jsorder', aggregated: true,
    handlers: [{ eventType: 'X', functions: [{ function: 'inc', targetSelector: '$.projection.n' }] }],
  });
  await projections.createOrUpdateDefinition({
    projectionName: 'jsc-count', feedName: 'jsorder', aggregated: true,
    handlers: [{ eventType: 'OrderPlaced', functions: [{ function: 'inc', targetSelector: '$.projection.orders' }] }],
  });
  // External function handlers (functionUri) with a signingSecret: stored,
  // the secret never shown back.
  await projections.createOrUpdateDefinition({
    projectionName: 'jsc-hook', feedName: 'jsorder', signingSecret: 'whsec',
    handlers: [{ eventType: 'NeverSaved', functionUri: 'https://example.com/f' }],
  });
  const hook = await projections.getProjectionDefinition({ projectionName: 'jsc-hook' });
  assert.deepEqual(hook.handlers, [{ eventType: 'NeverSaved', functionUri: 'https://example.com/f' }]);
  assert.equal(hook.signingSecret, undefined, 'the secret is not shown back');
  await projections.deleteProjectionDefinition({ projectionName: 'jsc-hook' });
  // A target the server's outbound policy refuses (loopback): 422.
  await rejects(() => projections.createOrUpdateDefinition({
    projectionName: 'jsc-hook', feedName: 'jsorder', handlers: [{ eventType: 'X', functionUri: 'http://127.0.0.1:9/f' }],
  }), status(422), 'loopback functionUri');
});

await step('projections.getProjectionDefinition', async () => {
  const d = await projections.getProjectionDefinition({ projectionName: 'jsc-count' });
  assert.equal(d.projectionName, 'jsc-count');
  assert.equal(d.feedName, 'jsorder');
  assert.equal(d.aggregated, true);
  assert.equal(d.handlers.length, 1);
  assert.equal(d.handlers[0].eventType, 'OrderPlaced', 'the PUT replaced the definition');
  assert.deepEqual(d.handlers[0].functions, [{ function: 'inc', targetSelector: '$.projection.orders' }]);
  assert.equal(d.description, undefined, 'no description was given');
  const o = await projections.getProjectionDefinition({ projectionName: 'jsc-orders' });
  assert.equal(o.description, 'Each order: customer, status, total.');
  assert.deepEqual(o.indexedFields, ['$.projection.customer']);
  // A new description alone updates the definition (without a rebuild).
  await projections.createOrUpdateDefinition({ ...o, description: 'Each order:\n\tcustomer, status and total ✓' });
  const o2 = await projections.getProjectionDefinition({ projectionName: 'jsc-orders' });
  assert.equal(o2.description, 'Each order:\n\tcustomer, status and total ✓');
  assert.deepEqual(o2.handlers, o.handlers);
  // Longer than 1,000 bytes: 422.
  await rejects(() => projections.createOrUpdateDefinition({ ...o, description: 'x'.repeat(1001) }),
    status(422), 'description over 1,000 bytes');
  const e = await rejects(() => projections.getProjectionDefinition({ projectionName: 'jsc-none' }),
    errors.isProjectionDefinitionNotFound, 'missing definition');
  assert.equal(e.projectionName, 'jsc-none');
});

// ---- aggregates
await step('aggregates.create', async () => {
  assert.equal(await orders.create('o-1', (o) => o.place('ada')), 1);
  // Workaround 2: isConflict comes from dist/error.js.
  const e = await rejects(() => orders.create('o-1', (o) => o.place('bob')), errors.isConflict, 'create twice');
  assert.equal(e.aggregateId, 'o-1');
  assert.equal(await version(orders, 'o-1'), 1);
});

await step('aggregates.exists', async () => {
  assert.equal(await orders.exists({ aggregateId: 'o-1' }), true);
  assert.equal(await orders.exists({ aggregateId: 'o-none' }), false);
});

await step('aggregates.update', async () => {
  assert.equal(await orders.update('o-1', (o) => o.add('pen', 1.5)), 1);
  assert.equal(await orders.update('o-1', (o) => o.add('ink', 2.25)), 1);
  const s = await state(orders, 'o-1');
  assert.deepEqual(s, { status: 'placed', customer: 'ada', total: 3.75, items: 2 });
  assert.equal(await version(orders, 'o-1'), 3);
  // A missing aggregate: the load is 404.
  await rejects(() => orders.update('o-none', (o) => o.add('x', 1)), status(404), 'update of a missing aggregate');
});

await step('aggregates.save', async () => {
  assert.equal(await orders.save({ aggregateId: 'o-2', events: placed('cy'), expectedVersion: 0 }), 1);
  assert.equal(await orders.save({ aggregateId: 'o-2', events: [DomainEvent.create(new ItemAdded('pad', 10))] }), 1);
  await rejects(() => orders.save({ aggregateId: 'o-2', events: placed('cy'), expectedVersion: 1 }), status(409), 'stale expectedVersion');
  assert.equal(await version(orders, 'o-2'), 2);
  // Nothing to save: the client does not call the server.
  assert.equal(await orders.save({ aggregateId: 'o-2', events: [] }), 0);
});

await step('aggregates.saveBulk', async () => {
  const n = await orders.saveBulk({ batches: [
    { aggregateId: 'o-3', events: placed('dan'), expectedVersion: 0 },
    { aggregateId: 'o-4', events: [...placed('eve'), DomainEvent.create(new ItemAdded('cap', 4))] },
  ] });
  assert.equal(n, 3);
  assert.deepEqual(await state(orders, 'o-4'), { status: 'placed', customer: 'eve', total: 4, items: 1 });
  // A conflict in one batch stores none.
  await rejects(() => orders.saveBulk({ batches: [
    { aggregateId: 'o-5', events: placed('fay') },
    { aggregateId: 'o-3', events: placed('dan'), expectedVersion: 0 },
  ] }), status(409), 'bulk conflict');
  assert.equal(await orders.exists({ aggregateId: 'o-5' }), false);
});

await step('aggregates.bulkSave', async () => {
  assert.equal(await orders.bulkSave([{ aggregateId: 'o-6', events: placed('gus') }]), 1);
  // Bug 4: a refused bulkSave resolves to undefined instead of throwing.
  const out = await orders.bulkSave([{ aggregateId: 'o-6', events: placed('gus'), expectedVersion: 0 }]);
  assert.equal(out, undefined);
  assert.equal(await version(orders, 'o-6'), 1, 'nothing stored by the refused bulkSave');
});

await step('aggregates.bulkUpdate', async () => {
  // Bug 3: the batches have no aggregateId: 422, nothing stored.
  await rejects(() => orders.bulkUpdate(['o-3', 'o-4'], (o) => o.add('x', 1)), status(422), 'bulkUpdate');
  assert.equal(await version(orders, 'o-3'), 1);
  assert.equal(await version(orders, 'o-4'), 1);
  // The workaround: saveBulk with the ids and versions.
  const batches = [];
  for (const id of ['o-3', 'o-4']) {
    const { aggregate, metadata } = await orders.loadInternal(id);
    batches.push({ aggregateId: id, events: aggregate.add('x', 1), expectedVersion: metadata.version });
  }
  assert.equal(await orders.saveBulk({ batches }), 2);
  assert.equal(await version(orders, 'o-3'), 2);
});

await step('aggregates.deleteAggregate', async () => {
  await orders.save({ aggregateId: 'o-gone', events: placed('hal') });
  const first = await orders.deleteAggregate({ aggregateId: 'o-gone' });
  // The client returns axios' whole response, not its data.
  assert.equal(first.status, 200);
  const token = first.data.deleteToken;
  assert.equal(typeof token, 'string');
  await rejects(() => orders.deleteAggregate({ aggregateId: 'o-1' }, { deleteToken: token }), status(403), 'foreign token');
  const second = await orders.deleteAggregate({ aggregateId: 'o-gone' }, { deleteToken: token });
  assert.equal(second.status, 204);
  assert.equal(await orders.exists({ aggregateId: 'o-gone' }), false);
  assert.equal(await orders.exists({ aggregateId: 'o-1' }), true);
});

await step('aggregates.deleteAggregateType', async () => {
  await others.save({ aggregateId: 'x-1', events: placed('ivy') });
  await others.save({ aggregateId: 'x-2', events: placed('jay') });
  const first = await others.deleteAggregateType({ aggregateType: 'jsother' });
  const second = await others.deleteAggregateType({ aggregateType: 'jsother' }, { deleteToken: first.data.deleteToken });
  assert.equal(second.status, 204);
  assert.equal(await others.exists({ aggregateId: 'x-1' }), false);
});

// ---- projections: queries (the server waits for this process's saves)
await step('projections.getSingleProjection', async () => {
  const p = await projections.getSingleProjection({ projectionName: 'jsc-orders', projectionId: 'o-1' }, { awaitCreation: 5000 });
  assert.equal(p.projectionId, 'o-1');
  assert.equal(p.data.customer, 'ada');
  assert.equal(p.data.status, 'placed');
  assert.equal(Number(p.data.total), 3.75);
  assert.equal(Number(p.data.items), 2);
  assert.ok(p.createdAt > 0 && p.updatedAt >= p.createdAt);
  const e = await rejects(() => projections.getSingleProjection({ projectionName: 'jsc-orders', projectionId: 'o-none' }),
    errors.isProjectionNotFound, 'missing instance');
  assert.equal(e.projectionId, 'o-none');
  await rejects(() => projections.getSingleProjection({ projectionName: 'jsc-none', projectionId: 'o-1' }),
    errors.isProjectionNotFound, 'missing projection');
});

await step('projections.getAggregatedProjection', async () => {
  const p = await projections.getAggregatedProjection({ projectionName: 'jsc-revenue' });
  assert.equal(p.projectionId, 'jsc-revenue');
  // o-1: 1.5 + 2.25, o-2: 10, o-4: 4, o-3 and o-4: 1 each.
  assert.equal(Number(p.data.revenue), 19.75);
  const c = await projections.getAggregatedProjection({ projectionName: 'jsc-count' });
  // o-1, o-2, o-3, o-4, o-6 (o-gone was deleted: its events left the projection).
  assert.equal(Number(c.data.orders), 5, JSON.stringify(c.data));
});

await step('projections.listSingleProjections', async () => {
  const all = await projections.listSingleProjections({ projectionName: 'jsc-orders' });
  assert.deepEqual(all.projections.map((p) => p.projectionId).sort(), ['o-1', 'o-2', 'o-3', 'o-4', 'o-6']);
  assert.equal(all.totalCount, 5);
  assert.equal(all.hasMore, false);
  const page = await projections.listSingleProjections({ projectionName: 'jsc-orders' },
    { sort: '-projectionId', skip: 1, limit: 2 });
  assert.deepEqual(page.projections.map((p) => p.projectionId), ['o-4', 'o-3']);
  assert.equal(page.hasMore, true);
  assert.equal(page.totalCount, 5);
  const some = await projections.listSingleProjections({ projectionName: 'jsc-orders' }, { id: ['o-2', 'o-6'] });
  assert.deepEqual(some.projections.map((p) => p.projectionId).sort(), ['o-2', 'o-6']);
  assert.equal(some.projections.find((p) => p.projectionId === 'o-2').data.customer, 'cy');
  // Bug 8: listSingleProjections copies only the options it knows into the
  // query, and 4.12.0 knows no search: it is dropped, every instance comes
  // back. Workaround: send the GET with axiosClient.
  const dropped = await projections.listSingleProjections({ projectionName: 'jsc-orders' }, { search: 'DA' });
  assert.equal(dropped.totalCount, 5, 'bug 8 is still there: search dropped');
  const url = client.ProjectionsClient.singleProjectionsUrl('jsc-orders');
  const found = (await projections.axiosClient.get(url, { ...projections.axiosConfig(), params: { search: 'DA', sort: '-projectionId' } })).data;
  assert.deepEqual(found.projections.map((p) => p.projectionId), ['o-3']);
  assert.equal(found.totalCount, 1);
  const ada = (await projections.axiosClient.get(url, { ...projections.axiosConfig(), params: { search: 'a', limit: 1 } })).data;
  assert.deepEqual(ada.projections.map((p) => p.projectionId), ['o-1'], 'only ada starts with a (not dan)');
  assert.equal(ada.hasMore, false);
  assert.equal(ada.totalCount, 1);
  const count = (await projections.axiosClient.get(url + '/_count', { ...projections.axiosConfig(), params: { search: 'gu' } })).data;
  assert.equal(count.count, 1);
  await rejects(() => projections.axiosClient.get(url, { ...projections.axiosConfig(), params: { search: 'x'.repeat(201) } }),
    (e) => e.statusCode === 400, 'a search over 200 bytes');
});

await step('projections.countSingleProjections', async () => {
  assert.equal(await projections.countSingleProjections({ projectionName: 'jsc-orders' }), 5);
  await rejects(() => projections.countSingleProjections({ projectionName: 'jsc-none' }), errors.isProjectionNotFound, 'count of a missing projection');
});

await step('projections.deleteProjections', async () => {
  await projections.deleteProjections({ projectionType: ProjectionType.SINGLE, projectionName: 'jsc-orders' });
  // Rebuilt from the feed.
  const p = await projections.getSingleProjection({ projectionName: 'jsc-orders', projectionId: 'o-2' }, { awaitCreation: 5000 });
  assert.equal(Number(p.data.total), 10);
  await projections.deleteProjections({ projectionType: ProjectionType.AGGREGATED, projectionName: 'jsc-revenue' });
  await rejects(() => projections.deleteProjections({ projectionType: ProjectionType.AGGREGATED, projectionName: 'jsc-orders' }),
    errors.isProjectionNotFound, 'reset of the other kind');
});

await step('projections.recreateSingleProjections', async () => {
  await projections.recreateSingleProjections({ projectionName: 'jsc-orders' });
  const p = await projections.getSingleProjection({ projectionName: 'jsc-orders', projectionId: 'o-1' }, { awaitCreation: 5000 });
  assert.equal(p.data.customer, 'ada');
});

await step('projections.recreateAggregatedProjection', async () => {
  await projections.recreateAggregatedProjection({ projectionName: 'jsc-revenue' });
  let p;
  for (let i = 0; i < 100; i++) { // rebuilt in the background after a reset
    try { p = await projections.getAggregatedProjection({ projectionName: 'jsc-revenue' }); } catch { p = undefined; }
    if (p && Number(p.data.revenue) === 19.75) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(Number(p && p.data.revenue), 19.75);
});

await step('projections.deleteProjectionDefinition', async () => {
  await projections.deleteProjectionDefinition({ projectionName: 'jsc-count' });
  await rejects(() => projections.getProjectionDefinition({ projectionName: 'jsc-count' }),
    errors.isProjectionDefinitionNotFound, 'deleted definition');
  await rejects(() => projections.deleteProjectionDefinition({ projectionName: 'jsc-count' }),
    errors.isProjectionDefinitionNotFound, 'deleting twice');
});

// ---- feeds
await step('feeds.loadOverview', async () => {
  const o = await feeds.loadOverview();
  const f = o.feeds.find((x) => x.aggregateType === 'jsorder');
  assert.ok(f, JSON.stringify(o));
  assert.equal(f.aggregateCount, 5);
  assert.ok(f.batchCount >= 9 && f.eventCount >= f.batchCount, JSON.stringify(f));
});

await step('feeds.loadFeed', async () => {
  const first = await feeds.loadFeed({ feedName: 'jsorder' }, { since: 0, limit: 2 });
  assert.equal(first.entries.length, 2);
  assert.equal(first.hasMore, true);
  assert.deepEqual(first.entries.map((e) => e.sequenceNumber), [1, 2]);
  assert.equal(first.entries[0].aggregateId, 'o-1');
  assert.equal(first.entries[0].feedName, 'jsorder');
  assert.equal(first.entries[0].events[0].eventType, 'OrderPlaced');
  assert.deepEqual(first.entries[0].events[0].data, { customer: 'ada' });
  assert.ok(first.entries[0].timestamp > 1.6e12);
  const rest = await feeds.loadFeed({ feedName: 'jsorder' }, { since: 2 });
  assert.equal(rest.hasMore, false);
  // The head counts deleted batches (o-gone) too.
  assert.ok(rest.currentSequenceNumber >= rest.entries.at(-1).sequenceNumber);
  // Partitions split the aggregates between readers.
  const ids = new Set();
  for (const n of [0, 1]) {
    const part = await feeds.loadFeed({ feedName: 'jsorder' }, { partitionCount: 2, partitionNumber: n, limit: 1000 });
    part.entries.forEach((e) => ids.add(e.aggregateId));
  }
  assert.deepEqual([...ids].sort(), ['o-1', 'o-2', 'o-3', 'o-4', 'o-6']);
  // A long poll answers as soon as an event is saved.
  const head = rest.currentSequenceNumber;
  const started = Date.now();
  const poll = feeds.loadFeed({ feedName: 'jsorder' }, { since: head, waitTime: 10000 });
  setTimeout(() => orders.save({ aggregateId: 'o-7', events: placed('kim') }), 200);
  const got = await poll;
  assert.equal(got.entries.length, 1);
  assert.equal(got.entries[0].aggregateId, 'o-7');
  assert.ok(Date.now() - started < 5000, 'the long poll answered at once');
  await rejects(() => feeds.loadFeed({ feedName: 'jsnone' }), status(404), 'missing feed');
  // Filtering _all by type.
  const all = await feeds.loadFeed({ feedName: '_all' }, { types: ['jsother'] });
  assert.equal(all.entries.length, 0, 'the jsother aggregates were deleted');
});

await step('feeds.loadFeed from/to', async () => {
  const whole = await feeds.loadFeed({ feedName: 'jsorder' }, { since: 0, limit: 1000 });
  const ts = whole.entries.map((e) => e.timestamp);
  assert.ok(ts.length >= 5, String(ts.length));
  // timestamp is in milliseconds, the server keeps microseconds: from the
  // start of one millisecond through the end of another selects exactly
  // the entries whose timestamp is between them.
  const lo = [...ts].sort((a, b) => a - b)[1];
  const hi = [...ts].sort((a, b) => a - b).at(-2);
  const from = new Date(lo).toISOString();
  const to = new Date(hi).toISOString().replace('Z', '999Z');
  const want = whole.entries.filter((e) => e.timestamp >= lo && e.timestamp <= hi).map((e) => e.sequenceNumber);
  assert.ok(want.length >= 3 && want.length < ts.length, JSON.stringify(ts));
  const ranged = await feeds.loadFeed({ feedName: 'jsorder' }, { from, to, limit: 1000 });
  assert.deepEqual(ranged.entries.map((e) => e.sequenceNumber), want);
  assert.equal(ranged.hasMore, false);
  assert.equal(ranged.currentSequenceNumber, whole.currentSequenceNumber);
  // Paged with limit and since, the same entries, once each.
  const paged = [];
  let since = 0;
  for (let i = 0; i < 50; i++) {
    const page = await feeds.loadFeed({ feedName: 'jsorder' }, { from, to, since, limit: 2 });
    paged.push(...page.entries.map((e) => e.sequenceNumber));
    if (page.entries.length > 0) since = page.entries.at(-1).sequenceNumber;
    if (!page.hasMore) break;
  }
  assert.deepEqual(paged, want);
  // Only from, only to; dates mean whole days (UTC).
  const after = await feeds.loadFeed({ feedName: 'jsorder' }, { from, limit: 1000 });
  assert.deepEqual(after.entries.map((e) => e.sequenceNumber), whole.entries.filter((e) => e.timestamp >= lo).map((e) => e.sequenceNumber));
  const upTo = await feeds.loadFeed({ feedName: 'jsorder' }, { to, limit: 1000 });
  assert.deepEqual(upTo.entries.map((e) => e.sequenceNumber), whole.entries.filter((e) => e.timestamp <= hi).map((e) => e.sequenceNumber));
  const day = (ms) => new Date(ms).toISOString().slice(0, 10);
  const days = await feeds.loadFeed({ feedName: 'jsorder' }, { from: day(Math.min(...ts)), to: day(Math.max(...ts)), limit: 1000 });
  assert.equal(days.entries.length, whole.entries.length);
  const old = await feeds.loadFeed({ feedName: 'jsorder' }, { from: '2020-01-01', to: '2020-12-31' });
  assert.equal(old.entries.length, 0);
  // The feed of all types, with types.
  const all = await feeds.loadFeed({ feedName: '_all' }, { from, to, types: ['jsorder'], limit: 1000 });
  assert.equal(all.entries.length, want.length);
  assert.ok(all.entries.every((e) => e.aggregateType === 'jsorder'));
  // A client's mistake is 400.
  await rejects(() => feeds.loadFeed({ feedName: 'jsorder' }, { from: 'yesterday' }), status(400), 'from');
  await rejects(() => feeds.loadFeed({ feedName: 'jsorder' }, { from: '2026-11-02', to: '2026-11-01' }), status(400), 'from after to');
});

await step('feeds.loadAllFeed', async () => {
  const all = await feeds.loadAllFeed({ feedName: '_all', options: { since: 0, limit: 1000 } });
  assert.ok(all.entries.length >= 10);
  const seq = all.entries.map((e) => e.sequenceNumber);
  assert.deepEqual(seq, [...seq].sort((a, b) => a - b));
  assert.ok(all.currentSequenceNumber >= seq.at(-1));
  // Bug 6: an array option is sent as types[]=...: refused.
  await rejects(() => feeds.loadAllFeed({ feedName: '_all', options: { types: ['jsorder'] } }), status(400), 'types[]');
});

await step('feeds.getCurrentSequenceNumber', async () => {
  // Bug 5: the header name is looked up with capitals: NaN.
  assert.ok(Number.isNaN(await feeds.getCurrentSequenceNumber({ feedName: 'jsorder' })));
  const res = await feeds.axiosClient.head('/feeds/jsorder');
  const head = Number(res.headers['serialized-sequencenumber-current']);
  assert.ok(head >= 10, String(head));
  const f = await feeds.loadFeed({ feedName: 'jsorder' }, { since: 0, limit: 1000 });
  assert.equal(f.currentSequenceNumber, head);
});

await step('feeds.getGlobalSequenceNumber', async () => {
  assert.ok(Number.isNaN(await feeds.getGlobalSequenceNumber()));
  const res = await feeds.axiosClient.head('/feeds/_all');
  const head = Number(res.headers['serialized-sequencenumber-current']);
  const all = await feeds.loadFeed({ feedName: '_all' }, { since: 0, limit: 1000 });
  assert.equal(all.currentSequenceNumber, head);
});

// ---- tenants: the tenant client and the tenantId options
await step('tenantClient and tenantId options', async () => {
  const tenants = pointed(serialized.tenantClient());
  const a = randomUUID(), b = randomUUID();
  await tenants.addTenant({ tenantId: a, reference: 'Acme' });
  await tenants.addTenant({ tenantId: b, reference: 'Globex' });
  await tenants.updateTenant({ tenantId: a, reference: 'Acme Inc' });
  const list = (await tenants.axiosClient.get('/tenants')).data.tenants;
  assert.ok(list.some((t) => t.tenantId === a && t.reference === 'Acme Inc' && !t.deleted), JSON.stringify(list));
  await orders.create('t-o-1', (o) => o.place('Ann'), { tenantId: a });
  assert.equal(await orders.exists({ aggregateId: 't-o-1' }, { tenantId: a }), true);
  assert.equal(await orders.exists({ aggregateId: 't-o-1' }, { tenantId: b }), false);
  assert.equal(await orders.exists({ aggregateId: 't-o-1' }), false);
  const p = await projections.getSingleProjection({ projectionName: 'jsc-orders', projectionId: 't-o-1' },
    { tenantId: a, awaitCreation: 5000 });
  assert.equal(p.data.customer, 'Ann');
  await rejects(() => projections.getSingleProjection({ projectionName: 'jsc-orders', projectionId: 't-o-1' }, { tenantId: b }),
    status(404), 'projection of another tenant');
  const feed = await feeds.loadFeed({ feedName: 'jsorder' }, { tenantId: a });
  assert.equal(feed.entries.length, 1);
  await rejects(() => feeds.loadFeed({ feedName: 'jsorder' }, { tenantId: b }), status(404), 'feed of another tenant');
  await tenants.deleteTenant({ tenantId: a });
  // Not 404 for a deleted or unknown tenant: exists would read that as false.
  await rejects(() => orders.exists({ aggregateId: 't-o-1' }, { tenantId: a }), status(400), 'deleted tenant');
  await rejects(() => orders.exists({ aggregateId: 'o-1' }, { tenantId: randomUUID() }), status(400), 'unknown tenant');
  await tenants.deleteTenant({ tenantId: b });
});

await step('reactionsClient', async () => {
  const reactions = pointed(serialized.reactionsClient());
  // A target the server may call (a loopback one would be refused with
  // 422 by its outbound policy); a day away, so nothing is sent.
  const def = {
    reactionName: 'js-reminder', feedName: 'jsorder', reactOnEventType: 'OrderPlaced',
    cancelOnEventTypes: ['OrderCancelled'], offset: 'P1D',
    action: { actionType: 'HTTP_POST', targetUri: 'https://hooks.example.com/remind', signingSecret: 's3cret' },
  };
  await reactions.createOrUpdateReactionDefinition(def);
  const got = await reactions.getReactionDefinition({ reactionName: 'js-reminder' });
  assert.equal(got.reactOnEventType, 'OrderPlaced');
  assert.equal(got.action.signingSecret, undefined, 'the secret is not shown back');
  const list = await reactions.listReactionDefinitions();
  assert.ok(list.definitions.some((d) => d.reactionName === 'js-reminder'), JSON.stringify(list));
  await rejects(() => reactions.createOrUpdateReactionDefinition({ ...def, offset: 'P1M' }), status(422), 'a month offset');

  await orders.save({ aggregateId: 'o-react', events: placed('rex') });
  let scheduled;
  for (let i = 0; i < 100 && !scheduled; i++) {
    const page = await reactions.listReactions({ status: 'SCHEDULED', skip: 0, limit: 10 });
    scheduled = page.reactions.find((r) => r.aggregateId === 'o-react');
    if (!scheduled) await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(scheduled, 'the saved OrderPlaced scheduled a reaction');
  assert.equal(scheduled.reactionName, 'js-reminder');
  assert.equal(scheduled.status, 'SCHEDULED');
  await reactions.deleteReaction({ reactionId: scheduled.reactionId });
  const cancelled = await reactions.listReactions({ status: 'CANCELED' });
  assert.ok(cancelled.reactions.some((r) => r.reactionId === scheduled.reactionId), JSON.stringify(cancelled));
  await rejects(() => reactions.deleteReaction({ reactionId: scheduled.reactionId }), status(409), 'cancelling twice');
  await reactions.executeReaction({ reactionId: scheduled.reactionId });
  await rejects(() => reactions.executeReaction({ reactionId: randomUUID() }), status(404), 'an unknown reaction');
});

await step('reactionsClient tenantId options', async () => {
  // The definition js-reminder of the step before applies to every
  // tenant's events, each tenant's reactions its own.
  const reactions = pointed(serialized.reactionsClient());
  const tenants = pointed(serialized.tenantClient());
  const a = randomUUID(), b = randomUUID();
  await tenants.addTenant({ tenantId: a });
  await tenants.addTenant({ tenantId: b });
  await orders.create('t-react', (o) => o.place('Tia'), { tenantId: a });
  let scheduled;
  for (let i = 0; i < 100 && !scheduled; i++) {
    const page = await reactions.listReactions({ tenantId: a, status: 'SCHEDULED' });
    scheduled = page.reactions.find((r) => r.aggregateId === 't-react');
    if (!scheduled) await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(scheduled, "the tenant's OrderPlaced scheduled a reaction of the tenant");
  const ofB = await reactions.listReactions({ tenantId: b, status: 'ALL' });
  assert.equal(ofB.reactions.length, 0, JSON.stringify(ofB));
  const ofProject = await reactions.listReactions({ status: 'ALL' });
  assert.ok(!ofProject.reactions.some((r) => r.aggregateId === 't-react'), JSON.stringify(ofProject));
  await rejects(() => reactions.deleteReaction({ reactionId: scheduled.reactionId }, { tenantId: b }), status(404),
    "another tenant's reaction");
  await reactions.deleteReaction({ reactionId: scheduled.reactionId }, { tenantId: a });
  const cancelled = await reactions.listReactions({ tenantId: a, status: 'CANCELED' });
  assert.ok(cancelled.reactions.some((r) => r.reactionId === scheduled.reactionId), JSON.stringify(cancelled));
  await reactions.executeReaction({ reactionId: scheduled.reactionId }, { tenantId: a });
  await rejects(() => reactions.executeReaction({ reactionId: scheduled.reactionId }, { tenantId: b }), status(404),
    "executing another tenant's reaction");
  await tenants.deleteTenant({ tenantId: a });
  await tenants.deleteTenant({ tenantId: b });
});

await step('wrong keys', async () => {
  const bad = Serialized.create({ accessKey, secretAccessKey: 'wrong' });
  const c = bad.feedsClient();
  c.axiosClient.defaults.baseURL = base;
  await rejects(() => c.loadOverview(), errors.isUnauthorizedError, 'wrong secret');
});

console.log = log;
let failed = 0;
for (const [name, outcome] of results) {
  console.log(`${outcome === 'ok' ? 'ok  ' : 'FAIL'} ${name}${outcome === 'ok' ? '' : '\n' + outcome}`);
  if (outcome !== 'ok') failed++;
}
console.log(`official client: ${results.length - failed} passed, ${failed} failed`);
if (failed === 0) console.log('all checks passed');
process.exit(failed === 0 ? 0 : 1);
