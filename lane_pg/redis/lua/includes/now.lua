-- The time a script acts at, in epoch milliseconds: the caller's `now` when it passes one
-- (the test suite's injected clock), else the server's clock (TIME), never the worker's:
-- workers on hosts with skewed clocks then agree on what is due (bull #1288).
local function lane_now(given)
  if given ~= nil and given ~= cjson.null then
    return tonumber(given)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
