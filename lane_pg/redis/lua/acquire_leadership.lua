-- lane.acquire_leadership on the role's own key (KEYS[1] = `{prefix:leader:<role>}`, a hash:
-- holder, term, elected_at, expires_at; no expires_at once resigned): takes or renews the
-- role for `holder` until now + lease_ms. True when `holder` holds it afterwards (it was
-- free, lapsed before now, resigned, or already its own), false while another holder's
-- lease runs (nothing changes then). `term` counts the holders the role has had.
-- @include json
-- @include now

local args = lane_args()
local now = lane_now(args.now)
local until_ms = string.format('%d', now + args.lease_ms)
local current = redis.call('HMGET', KEYS[1], 'holder', 'term', 'expires_at')
if current[1] == args.holder then
  redis.call('HSET', KEYS[1], 'expires_at', until_ms)
  return lane_result(true)
end
if current[1] and current[3] and tonumber(current[3]) >= now then
  return lane_result(false)
end
local term = (tonumber(current[2]) or 0) + 1
redis.call('HSET', KEYS[1], 'holder', args.holder, 'term', term,
           'elected_at', string.format('%d', now), 'expires_at', until_ms)
return lane_result(true)
