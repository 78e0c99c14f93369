-- Floats are stored as the client sent them. `real` (single precision) rounded 0.1234567891 silently and
-- refused values below its range such as 1e-50 (an error, not a zero). Stored values keep the decimal
-- they were written as (through numeric: real 0.7 as double would read 0.699999988079071).
ALTER TABLE llm_configs ALTER COLUMN temperature TYPE double precision USING temperature::numeric::double precision;
ALTER TABLE agents ALTER COLUMN interruption_sensitivity TYPE double precision USING interruption_sensitivity::numeric::double precision;
