"""The wallet's tables (applied as component "module:wallet")."""

MIGRATIONS = [
    """
    CREATE TABLE wallet_members (
        user_id TEXT PRIMARY KEY,
        pin_hash TEXT,
        failed_pin_attempts INTEGER NOT NULL DEFAULT 0,
        locked_at_ms INTEGER,
        created_at_ms INTEGER NOT NULL
    );
    CREATE TABLE wallet_balances (
        user_id TEXT NOT NULL REFERENCES wallet_members(user_id),
        asset TEXT NOT NULL,
        balance_minor INTEGER NOT NULL CHECK (balance_minor >= 0),
        PRIMARY KEY (user_id, asset)
    );
    CREATE TABLE wallet_drafts (
        draft_id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        recipient TEXT NOT NULL,
        asset TEXT NOT NULL,
        amount_minor INTEGER NOT NULL,
        fee_minor INTEGER NOT NULL,
        total_minor INTEGER NOT NULL,
        created_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        transfer_id TEXT
    );
    CREATE TABLE wallet_transfers (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        transfer_id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        sender TEXT,
        recipient TEXT NOT NULL,
        asset TEXT NOT NULL,
        amount_minor INTEGER NOT NULL,
        fee_minor INTEGER NOT NULL,
        total_minor INTEGER NOT NULL,
        draft_id TEXT UNIQUE,
        command_id TEXT,
        created_at_ms INTEGER NOT NULL,
        UNIQUE (sender, command_id)
    );
    CREATE INDEX wallet_transfers_sender ON wallet_transfers(sender, seq);
    CREATE INDEX wallet_transfers_recipient ON wallet_transfers(recipient, seq);
    CREATE TABLE wallet_commands (
        user_id TEXT NOT NULL,
        command_id TEXT NOT NULL,
        status TEXT NOT NULL,
        draft_id TEXT,
        answer TEXT,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (user_id, command_id)
    )
    """,
    # Every unlock of a wallet's wrong-PIN lock (pin.py): whose, when, how and by whom.
    """
    CREATE TABLE wallet_unlocks (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        user_id TEXT NOT NULL,
        method TEXT NOT NULL,
        actor TEXT,
        at_ms INTEGER NOT NULL,
        locked_at_ms INTEGER,
        failed_attempts INTEGER NOT NULL,
        cleared_pin INTEGER NOT NULL
    );
    CREATE INDEX wallet_unlocks_user ON wallet_unlocks(user_id, seq)
    """,
]
