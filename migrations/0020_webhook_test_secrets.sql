-- The secret that signs an account's Test requests (an api_call action's Test button), apart from the one that
-- signs its deliveries: whoever may press Test in a workspace (an admin) writes what Test sends, and a receiver
-- must not take that for a delivery signed with the owner's secret. One per account, made on first use, sealed
-- like every stored secret.
CREATE TABLE webhook_test_secrets (
  user_id text PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  secret text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
