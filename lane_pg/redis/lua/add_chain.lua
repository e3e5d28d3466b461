-- lane.add_chain (CHAIN-1, sql/functions/19_chains.sql) on the head's queue (KEYS[1]): the
-- head link, carrying the later links and the catch job (includes/chains.lua) the client
-- checked and built; a repeated add finds the head as it was. Returns the head's job.
-- @include json
-- @include now
-- @include chains

local args = lane_args()
local now = lane_now(args.now)
local catch = args.catch
if catch == cjson.null then
  catch = nil
end
return lane_result(lane_chain_add(args.head, args.rest, catch, now))
