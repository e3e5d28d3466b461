-- Arguments arrive as one JSON document in ARGV[1]; results leave as one JSON text.
local function lane_args()
  return cjson.decode(ARGV[1])
end

local function lane_result(value)
  return cjson.encode(value)
end
