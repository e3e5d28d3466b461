-- Test probe of includes/json_key.lua: each given JSON object text with the key set.
-- @include json
-- @include json_key
local args = lane_args()
local out = {}
for i, case in ipairs(args.cases) do
  out[i] = lane_json_set_key(case.text, args.name, args.value)
end
return lane_result(out)
