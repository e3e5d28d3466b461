-- lane.reserve_deduplication_key (TX-10): takes `args.id` for the push `args.token` for
-- `args.ttl_ms`, before its job exists (a unique row with no job). True when the token
-- holds it now (also when it already did); false when a live owner or reservation of
-- this queue holds it. A row that no longer blocks goes. The client checked the inputs.
-- @include json
-- @include now
-- @include owners

local args = lane_args()
local now = lane_now(args.now)
lane_ensure_queue(now)
local owner = lane_owner(args.id)
if owner ~= nil then
  if lane_owner_reserved(owner, now) or lane_owner_job(args.id, owner, now) ~= nil then
    return lane_result(owner.token == args.token)
  end
  lane_owner_delete(args.id, now)
end
lane_owner_write(args.id, {kind = 'unique', expires_at = now + args.ttl_ms, token = args.token,
                           created_at = now})
return lane_result(true)
