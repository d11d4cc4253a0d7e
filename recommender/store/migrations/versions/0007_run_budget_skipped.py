"""run budget_skipped: a stored flag for a run refused (or stopped) by the money or time budget

The reason keeps its "budget: " prefix (older code reads it); existing runs are back-filled from it.

Revision ID: 0007
Revises: 0006
"""
from alembic import op
import sqlalchemy as sa


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a plain ADD COLUMN: a batch would recreate the table on SQLite (the default is an expression), and recreating
    # `runs` with foreign keys on would cascade-delete every run's phases, series and windows
    op.add_column('runs', sa.Column('budget_skipped', sa.Boolean(), nullable=False, server_default=sa.false()))
    op.execute("UPDATE runs SET budget_skipped = TRUE WHERE reason LIKE 'budget: %'")


def downgrade() -> None:
    with op.batch_alter_table('runs') as batch:
        batch.drop_column('budget_skipped')
