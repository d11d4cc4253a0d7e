"""run hardware: the hardware each run served on and the backend that served it; GPU power per window

Revision ID: 0005
Revises: 0004
"""
from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runs') as batch:
        batch.add_column(sa.Column('hardware', sa.JSON(), nullable=True))
        batch.add_column(sa.Column('backend', sa.String(length=60), nullable=True))
    with op.batch_alter_table('windows') as batch:
        batch.add_column(sa.Column('gpu_power_w', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('windows') as batch:
        batch.drop_column('gpu_power_w')
    with op.batch_alter_table('runs') as batch:
        batch.drop_column('backend')
        batch.drop_column('hardware')
