"""steady-state windows table; phase stability and flags

Revision ID: 0002
Revises: 0001
"""
from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

_FLOATS = ("p50_ms", "p90_ms", "p95_ms", "p99_ms")
_SERVER_FLOATS = ("late_share", "generator_cpu_percent", "server_cpu_percent", "server_rss_mb", "gpu_utilization_percent",
                  "gpu_memory_mb", "queue_us", "compute_input_us", "compute_infer_us", "compute_output_us")


def upgrade() -> None:
    op.create_table('windows',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('repeat', sa.Integer(), nullable=False),
    sa.Column('phase_index', sa.Integer(), nullable=False),
    sa.Column('window_index', sa.Integer(), nullable=False),
    sa.Column('start_s', sa.Float(), nullable=False),
    sa.Column('end_s', sa.Float(), nullable=False),
    sa.Column('load', sa.Float(), nullable=False),
    sa.Column('requests', sa.Integer(), nullable=False),
    sa.Column('errors', sa.Integer(), nullable=False),
    sa.Column('samples', sa.Integer(), nullable=False),
    sa.Column('invocations_per_minute', sa.Float(), nullable=False),
    *(sa.Column(name, sa.Float(), nullable=True) for name in _FLOATS),
    sa.Column('stable', sa.Boolean(), nullable=False),
    *(sa.Column(name, sa.Float(), nullable=True) for name in _SERVER_FLOATS),
    sa.Column('executions', sa.Integer(), nullable=True),
    sa.Column('inferences', sa.Integer(), nullable=True),
    sa.Column('avg_batch_size', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('windows', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_windows_run_id'), ['run_id'], unique=False)
    with op.batch_alter_table('phase_summaries', schema=None) as batch_op:
        batch_op.add_column(sa.Column('stable', sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column('flags', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('phase_summaries', schema=None) as batch_op:
        batch_op.drop_column('flags')
        batch_op.drop_column('stable')
    with op.batch_alter_table('windows', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_windows_run_id'))
    op.drop_table('windows')
