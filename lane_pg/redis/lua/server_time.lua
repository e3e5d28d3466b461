-- The server's clock (or the given one), in epoch ms: what every script acts at.
-- @include json
-- @include now
local args = lane_args()
return lane_result({now = lane_now(args and args.now)})
