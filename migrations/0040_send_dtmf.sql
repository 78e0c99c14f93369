-- The send_dtmf tool (the agent presses keys: docs/voice.md, "Keypad"). The tool types' CHECK is replaced whole;
-- it names do_not_call too (the do-not-call tool of the same issue), so that whichever of the two migrations runs
-- last leaves both allowed.
ALTER TABLE agent_tools DROP CONSTRAINT IF EXISTS agent_tools_tool_type_check;
ALTER TABLE agent_tools ADD CONSTRAINT agent_tools_tool_type_check CHECK (tool_type IN ('api_rag', 'appointment_booking',
  'call_forwarding', 'end_call', 'calendar_one', 'calendar_two', 'booking_one', 'booking_two', 'crm', 'agent_transfer', 'mcp',
  'do_not_call', 'send_dtmf'));
