"""The Lua scripts of the Redis backend (``tether.store.redis``); docs/redis.md explains them.

Each script runs atomically on the server: no other command interleaves with it,
which is what makes a commit atomic across scopes and its head checks race-free.
Scripts build every member, blob and count in Python; Lua only checks and writes,
so the logic that must agree with the other backends stays in one language.

Per-scope keys, passed in KEYS in this order (``SCOPE_KEYS`` in redis.py):
meta (hash g s f n b k:<kind>), nodes (hash seq -> blob), ids (hash id -> seq),
rkeys (zset of resource keys), rheads (hash resource key -> seq of its head),
versions (zset of escaped key + NUL NUL + 12-digit seq).
"""

from __future__ import annotations

from typing import Final

# HMGET/HSET arguments per call: Lua's unpack() fails past a few thousand values.
_CHUNK = """
local CHUNK = 500
local function hmget(key, list)
  local out = {}
  for i = 1, #list, CHUNK do
    local part = redis.call('HMGET', key, unpack(list, i, math.min(i + CHUNK - 1, #list)))
    for j = 1, #part do out[#out + 1] = part[j] end
  end
  return out
end
local function multi(cmd, key, pre, list)
  for i = 1, #list, CHUNK * 2 do
    local args = {}
    for j = 1, #pre do args[#args + 1] = pre[j] end
    for j = i, math.min(i + CHUNK * 2 - 1, #list) do args[#args + 1] = list[j] end
    redis.call(cmd, key, unpack(args))
  end
end
"""

# KEYS: ns scopes zset, ns known zset, then 6 per write (meta nodes ids rkeys rheads versions).
# ARGV: number of writes, then per write:
#   scope, expected generation, expected sequence, new sequence, frontier,
#   n, n x (id, seq, blob), m, m x (resource key, seq, version member),
#   payload bytes, k, k x (kind, count)
# Returns {'ok'}, {'conflict', write index, generation, sequence} or
# {'dup', write index, id...}. Every check runs before the first write.
COMMIT: Final = (
    _CHUNK
    + """
local plans = {}
local a = 2
for w = 1, tonumber(ARGV[1]) do
  local p = {kb = 2 + (w - 1) * 6, scope = ARGV[a], eg = tonumber(ARGV[a + 1]),
             es = tonumber(ARGV[a + 2]), seq = ARGV[a + 3], frontier = ARGV[a + 4]}
  local n = tonumber(ARGV[a + 5])
  p.ids, p.nodes = {}, {}
  for i = 0, n - 1 do
    local b = a + 6 + i * 3
    p.ids[#p.ids + 1] = ARGV[b]
    p.nodes[#p.nodes + 1] = ARGV[b + 1]
    p.nodes[#p.nodes + 1] = ARGV[b + 2]
  end
  a = a + 6 + n * 3
  local m = tonumber(ARGV[a])
  p.rkeys, p.rheads, p.versions = {}, {}, {}
  for i = 0, m - 1 do
    local b = a + 1 + i * 3
    p.rkeys[#p.rkeys + 1] = '0'
    p.rkeys[#p.rkeys + 1] = ARGV[b]
    p.rheads[#p.rheads + 1] = ARGV[b]
    p.rheads[#p.rheads + 1] = ARGV[b + 1]
    p.versions[#p.versions + 1] = '0'
    p.versions[#p.versions + 1] = ARGV[b + 2]
  end
  a = a + 1 + m * 3
  p.bytes = ARGV[a]
  local k = tonumber(ARGV[a + 1])
  p.kinds = {}
  for i = 0, k - 1 do
    p.kinds[#p.kinds + 1] = {ARGV[a + 2 + i * 2], ARGV[a + 3 + i * 2]}
  end
  a = a + 2 + k * 2

  -- The fence: generation and sequence must be exactly what the writer computed against.
  local head = redis.call('HMGET', KEYS[p.kb + 1], 'g', 's')
  local g, s = tonumber(head[1]) or 0, tonumber(head[2]) or 0
  if g ~= p.eg or s ~= p.es then
    return {'conflict', w, g, s}
  end
  if #p.ids > 0 then
    local found = hmget(KEYS[p.kb + 3], p.ids)
    local dup = {'dup', w}
    for i = 1, #found do
      if found[i] then dup[#dup + 1] = p.ids[i] end
    end
    if #dup > 2 then return dup end
  end
  plans[w] = p
end

for w = 1, #plans do
  local p = plans[w]
  local meta = KEYS[p.kb + 1]
  -- A write without nodes only asserted its head (checked above): it writes nothing.
  if #p.ids > 0 then
    multi('HSET', KEYS[p.kb + 2], {}, p.nodes)
    local pairs_ = {}
    for i = 1, #p.ids do
      pairs_[#pairs_ + 1] = p.ids[i]
      pairs_[#pairs_ + 1] = p.nodes[i * 2 - 1]
    end
    multi('HSET', KEYS[p.kb + 3], {}, pairs_)
    if #p.rheads > 0 then
      multi('ZADD', KEYS[p.kb + 4], {}, p.rkeys)
      multi('HSET', KEYS[p.kb + 5], {}, p.rheads)
      multi('ZADD', KEYS[p.kb + 6], {}, p.versions)
    end
    redis.call('HSET', meta, 'g', p.eg, 's', p.seq, 'f', p.frontier)
    redis.call('HINCRBY', meta, 'n', #p.ids)
    redis.call('HINCRBY', meta, 'b', p.bytes)
    for i = 1, #p.kinds do
      redis.call('HINCRBY', meta, 'k:' .. p.kinds[i][1], p.kinds[i][2])
    end
    redis.call('ZADD', KEYS[1], 0, p.scope)
    redis.call('ZADD', KEYS[2], 0, p.scope)
  end
end
return {'ok'}
"""
)

# Reset one scope. Its data keys are unlinked (freed off the main thread), the
# meta hash keeps only the bumped generation.
_RESET_ONE = """
local function reset(meta, data, scopes, known, scope)
  local g = (tonumber(redis.call('HGET', meta, 'g')) or 0) + 1
  local had = tonumber(redis.call('HGET', meta, 's')) or 0
  redis.call('UNLINK', meta, unpack(data))
  redis.call('HSET', meta, 'g', g, 's', 0, 'f', '')
  redis.call('ZREM', scopes, scope)
  redis.call('ZADD', known, 0, scope)
  return g, had
end
"""

# KEYS: meta nodes ids rkeys rheads versions, ns scopes zset, ns known zset. ARGV: scope
# (and, for a reset only if the scope still stands there, the expected generation and
# sequence). Returns {new generation, non-empty scopes left in the namespace}, or
# {'conflict', generation, sequence}.
RESET: Final = (
    _RESET_ONE
    + """
if ARGV[2] then
  local head = redis.call('HMGET', KEYS[1], 'g', 's')
  local g, s = tonumber(head[1]) or 0, tonumber(head[2]) or 0
  if g ~= tonumber(ARGV[2]) or s ~= tonumber(ARGV[3]) then
    return {'conflict', g, s}
  end
end
local g = reset(KEYS[1], {KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]}, KEYS[7], KEYS[8], ARGV[1])
return {g, redis.call('ZCARD', KEYS[7])}
"""
)

# One batch of delete_namespace. KEYS: ns scopes zset, ns known zset.
# ARGV: namespace key stem (prefix + {tag}), lex lower bound, batch size.
# The per-scope key names are built here from the stem: they share the
# namespace's hash tag, so they live in the same cluster slot as KEYS.
# Returns {scopes that held nodes, last scope of the batch or '', scopes left}.
DELETE_BATCH: Final = (
    _RESET_ONE
    + """
local stem = ARGV[1]
local batch = redis.call('ZRANGEBYLEX', KEYS[2], ARGV[2], '+', 'LIMIT', 0, tonumber(ARGV[3]))
local count = 0
for i = 1, #batch do
  local sc = batch[i]
  local _, had = reset(stem .. ':h:' .. sc,
    {stem .. ':n:' .. sc, stem .. ':i:' .. sc, stem .. ':r:' .. sc,
     stem .. ':rh:' .. sc, stem .. ':v:' .. sc},
    KEYS[1], KEYS[2], sc)
  if had > 0 then count = count + 1 end
end
return {count, batch[#batch] or '', redis.call('ZCARD', KEYS[1])}
"""
)

# KEYS: meta nodes. ARGV: after, before (-1: none), limit, descending (0/1).
# Returns the blobs of the nodes in order; one consistent read of the head.
RANGE: Final = (
    _CHUNK
    + """
local s = tonumber(redis.call('HGET', KEYS[1], 's')) or 0
local lo = math.max(tonumber(ARGV[1]), 0)
local hi = s
local before = tonumber(ARGV[2])
if before >= 0 then hi = math.min(math.max(before - 1, 0), s) end
local limit = tonumber(ARGV[3])
if lo >= hi or limit <= 0 then return {} end
-- A page holds ``limit`` nodes unless the range ends first: sequences a prune cut
-- are holes, skipped a batch at a time until the page is full (a short page means
-- the end, as on every other store).
local out = {}
local q = lo + 1
local step = 1
if ARGV[4] == '1' then q = hi; step = -1 end
while #out < limit and q >= lo + 1 and q <= hi do
  local fields = {}
  local want = limit - #out
  while #fields < want and q >= lo + 1 and q <= hi do
    fields[#fields + 1] = q
    q = q + step
  end
  local blobs = hmget(KEYS[2], fields)
  for i = 1, #fields do
    if blobs[i] then out[#out + 1] = blobs[i] end
  end
end
return out
"""
)

# KEYS: ids nodes. ARGV: node ids. Returns one blob (or nil) per id.
GET: Final = (
    _CHUNK
    + """
local seqs = hmget(KEYS[1], ARGV)
local want = {}
for i = 1, #seqs do
  if seqs[i] then want[#want + 1] = seqs[i] end
end
if #want == 0 then return {} end
return hmget(KEYS[2], want)
"""
)

# KEYS: rkeys rheads nodes. ARGV: lex min, lex max. Returns {key, blob, key, blob...}.
HEADS: Final = (
    _CHUNK
    + """
local keys = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2])
if #keys == 0 then return {} end
local seqs = hmget(KEYS[2], keys)
local blobs = hmget(KEYS[3], seqs)
local out = {}
for i = 1, #keys do
  if blobs[i] then
    out[#out + 1] = keys[i]
    out[#out + 1] = blobs[i]
  end
end
return out
"""
)

# KEYS: versions nodes. ARGV: lex min, lex max, limit. Members end in a 12-digit seq.
VERSIONS: Final = (
    _CHUNK
    + """
local members = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
if #members == 0 then return {} end
local seqs = {}
for i = 1, #members do seqs[i] = tonumber(string.sub(members[i], -12)) end
return hmget(KEYS[2], seqs)
"""
)

# KEYS: ns scopes zset. ARGV: meta key stem (prefix + {tag} + ':h:'), lex min, lex max, limit.
# Returns {scope, generation, sequence, ...} read in one atomic step.
SCOPES: Final = """
local names = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[2], ARGV[3], 'LIMIT', 0, tonumber(ARGV[4]))
local out = {}
for i = 1, #names do
  local h = redis.call('HMGET', ARGV[1] .. names[i], 'g', 's')
  out[#out + 1] = names[i]
  out[#out + 1] = tonumber(h[1]) or 0
  out[#out + 1] = tonumber(h[2]) or 0
end
return out
"""

# Prune one scope: delete some of its nodes, bump its generation and append the record
# that says what was cut, atomically (tether.control.prune).
# KEYS: ns scopes zset, ns known zset, then the scope's 6 keys (as COMMIT's).
# ARGV: expected generation, expected sequence, n, n x (seq, id, version member or '',
#   resource key or ''),
#   payload bytes cut, k, k x (kind, count cut),
#   record id, seq, blob, resource key, version member, payload bytes, frontier.
# Returns {'ok', generation} or {'conflict', generation, sequence}.
PRUNE: Final = (
    _CHUNK
    + """
local meta, nodes, ids = KEYS[3], KEYS[4], KEYS[5]
local head = redis.call('HMGET', meta, 'g', 's')
local g, s = tonumber(head[1]) or 0, tonumber(head[2]) or 0
if g ~= tonumber(ARGV[1]) or s ~= tonumber(ARGV[2]) then
  return {'conflict', g, s}
end
local n = tonumber(ARGV[3])
local seqs, idl, members, keyed = {}, {}, {}, {}
for i = 0, n - 1 do
  local b = 4 + i * 4
  seqs[#seqs + 1] = ARGV[b]
  idl[#idl + 1] = ARGV[b + 1]
  if ARGV[b + 2] ~= '' then
    members[#members + 1] = ARGV[b + 2]
    keyed[#keyed + 1] = b
  end
end
if #seqs > 0 then
  multi('HDEL', nodes, {}, seqs)
  multi('HDEL', ids, {}, idl)
end
if #members > 0 then multi('ZREM', KEYS[8], {}, members) end
-- A key whose head was cut: its newest version left is its head (none: the key is gone).
for i = 1, #keyed do
  local b = keyed[i]
  local rk, member = ARGV[b + 3], ARGV[b + 2]
  if redis.call('HGET', KEYS[7], rk) == ARGV[b] then
    local esc = string.sub(member, 1, #member - 12)
    local left = redis.call('ZREVRANGEBYLEX', KEYS[8], '(' .. esc .. '\255', '[' .. esc, 'LIMIT', 0, 1)
    if #left > 0 then
      redis.call('HSET', KEYS[7], rk, tonumber(string.sub(left[1], #esc + 1)))
    else
      redis.call('HDEL', KEYS[7], rk)
      redis.call('ZREM', KEYS[6], rk)
    end
  end
end
local a = 4 + n * 4
redis.call('HINCRBY', meta, 'n', -n)
redis.call('HINCRBY', meta, 'b', -tonumber(ARGV[a]))
local k = tonumber(ARGV[a + 1])
for i = 0, k - 1 do
  redis.call('HINCRBY', meta, 'k:' .. ARGV[a + 2 + i * 2], -tonumber(ARGV[a + 3 + i * 2]))
end
a = a + 2 + k * 2
local rid, rseq, blob, rkey, member = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
redis.call('HSET', nodes, rseq, blob)
redis.call('HSET', ids, rid, rseq)
redis.call('ZADD', KEYS[6], 0, rkey)
redis.call('HSET', KEYS[7], rkey, rseq)
redis.call('ZADD', KEYS[8], 0, member)
redis.call('HSET', meta, 'g', g + 1, 's', rseq, 'f', ARGV[a + 6])
redis.call('HINCRBY', meta, 'n', 1)
redis.call('HINCRBY', meta, 'b', tonumber(ARGV[a + 5]))
redis.call('HINCRBY', meta, 'k:resource', 1)
return {'ok', g + 1}
"""
)
