-- The arguments back, through cjson both ways, with the keys it was given: the
-- loader's own check (types, nesting and text survive the round trip).
-- @include json
local args = lane_args()
return lane_result({args = args, keys = KEYS})
