-- One top-level key of a JSON object text (a job's options document) set without decoding
-- the document: cjson would turn 2^60 into a float and [] into {} in the rest of it. The
-- scanner knows strings (with their escapes) and brackets, enough to find where each
-- top-level value starts and ends.

local function lane_json_skip_space(text, i)
  return (string.find(text, '[^ \t\r\n]', i)) or (#text + 1)
end

-- The index just past the JSON string that opens at `i`.
local function lane_json_string_end(text, i)
  local j = i + 1
  while true do
    local k = string.find(text, '["\\]', j)
    if k == nil then
      error('lane_pg: malformed JSON text (an unterminated string)')
    end
    if string.sub(text, k, k) == '"' then
      return k + 1
    end
    j = k + 2  -- past the escaped character
  end
end

-- The index just past the JSON value that starts at `i`.
local function lane_json_value_end(text, i)
  local first = string.sub(text, i, i)
  if first == '"' then
    return lane_json_string_end(text, i)
  end
  if first == '{' or first == '[' then
    local depth = 0
    local j = i
    while true do
      local k = string.find(text, '[%[%]{}"]', j)
      if k == nil then
        error('lane_pg: malformed JSON text (an unclosed bracket)')
      end
      local c = string.sub(text, k, k)
      if c == '"' then
        j = lane_json_string_end(text, k)
      else
        depth = depth + ((c == '{' or c == '[') and 1 or -1)
        j = k + 1
        if depth == 0 then
          return j
        end
      end
    end
  end
  return (string.find(text, '[,}%]%s]', i)) or (#text + 1)  -- a number, true, false, null
end

-- `text` (a JSON object) with its top-level key `name` set to the JSON text `value`:
-- replaced where it stands, else appended last, as Python's {**d, name: value} does.
-- `name` is plain ASCII that needs no escape, written as the client writes it.
local function lane_json_set_key(text, name, value)
  local quoted = '"' .. name .. '"'
  local i = lane_json_skip_space(text, 1)
  if string.sub(text, i, i) ~= '{' then
    error('lane_pg: a JSON object was expected')
  end
  i = lane_json_skip_space(text, i + 1)
  if string.sub(text, i, i) == '}' then
    return string.sub(text, 1, i - 1) .. quoted .. ':' .. value .. string.sub(text, i)
  end
  while true do
    local key_end = lane_json_string_end(text, i)
    local colon = lane_json_skip_space(text, key_end)
    local start = lane_json_skip_space(text, colon + 1)
    local stop = lane_json_value_end(text, start)
    if string.sub(text, i, key_end - 1) == quoted then
      return string.sub(text, 1, start - 1) .. value .. string.sub(text, stop)
    end
    local after = lane_json_skip_space(text, stop)
    if string.sub(text, after, after) == '}' then
      return string.sub(text, 1, after - 1) .. ',' .. quoted .. ':' .. value
             .. string.sub(text, after)
    end
    i = lane_json_skip_space(text, after + 1)  -- past the comma
  end
end
